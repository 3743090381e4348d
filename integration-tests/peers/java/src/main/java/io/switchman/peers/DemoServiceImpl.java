package io.switchman.peers;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/** The provider's implementation; every call prints {@code CALL <instanceName> <method>}. */
public class DemoServiceImpl implements DemoService {
    private final String instanceName;
    private final PrintStream out;

    public DemoServiceImpl(String instanceName, PrintStream out) {
        this.instanceName = instanceName;
        this.out = out;
    }

    private void call(String method) {
        synchronized (out) {
            out.println("CALL " + instanceName + " " + method);
            out.flush();
        }
    }

    @Override
    public String sayHello(String name) {
        call("sayHello");
        return "hello, " + name + " from " + instanceName;
    }

    @Override
    public int add(int a, int b) {
        call("add");
        return a + b;
    }

    @Override
    public long count(List<String> items) {
        call("count");
        return items == null ? 0 : items.size();
    }

    @Override
    public User getUser(long id) {
        call("getUser");
        return User.sample(id);
    }

    @Override
    public User save(User user) {
        call("save");
        if (user != null) {
            user.setName(user.getName() + " (saved)");
        }
        return user;
    }

    @Override
    public Map<String, Object> echo(Map<String, Object> m) {
        call("echo");
        return m;
    }

    @Override
    public void ping() {
        call("ping");
    }

    @Override
    public String nothing() {
        call("nothing");
        return null;
    }

    @Override
    public String fail(String message) throws DemoException {
        call("fail");
        throw new DemoException(message);
    }

    @Override
    public String slow(int ms) {
        call("slow");
        try {
            Thread.sleep(Math.max(0, ms));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "slow " + ms + " from " + instanceName;
    }

    @Override
    public String whoami() {
        call("whoami");
        return instanceName;
    }

    @Override
    public String attachment(String key) {
        call("attachment");
        org.apache.dubbo.rpc.RpcContext.getServerContext().setAttachment("served-by", instanceName);
        Object v = org.apache.dubbo.rpc.RpcContext.getServerAttachment().getObjectAttachment(key);
        return v == null ? null : String.valueOf(v);
    }
}
