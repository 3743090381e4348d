package io.switchman.peers;

import java.io.PrintStream;
import java.util.List;
import java.util.Map;

/**
 * The methods both releases of {@link DemoServiceImpl} serve (the one in this source set, and
 * the upgraded one in {@code src/v2/java}); every call prints {@code CALL <instanceName> <method>}.
 * It implements no interface itself: each release's {@code DemoServiceImpl} implements its own
 * {@link DemoService} and inherits these methods.
 */
public abstract class DemoServiceBase {
    protected final String instanceName;
    private final PrintStream out;

    protected DemoServiceBase(String instanceName, PrintStream out) {
        this.instanceName = instanceName;
        this.out = out;
    }

    protected final void call(String method) {
        synchronized (out) {
            out.println("CALL " + instanceName + " " + method);
            out.flush();
        }
    }

    public String sayHello(String name) {
        call("sayHello");
        return "hello, " + name + " from " + instanceName;
    }

    public int add(int a, int b) {
        call("add");
        return a + b;
    }

    public long count(List<String> items) {
        call("count");
        return items == null ? 0 : items.size();
    }

    public User getUser(long id) {
        call("getUser");
        return User.sample(id);
    }

    public User save(User user) {
        call("save");
        if (user != null) {
            user.setName(user.getName() + " (saved)");
        }
        return user;
    }

    public Map<String, Object> echo(Map<String, Object> m) {
        call("echo");
        return m;
    }

    public void ping() {
        call("ping");
    }

    public String nothing() {
        call("nothing");
        return null;
    }

    public String fail(String message) throws DemoException {
        call("fail");
        throw new DemoException(message);
    }

    public String slow(int ms) {
        call("slow");
        try {
            Thread.sleep(Math.max(0, ms));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "slow " + ms + " from " + instanceName;
    }

    public String whoami() {
        call("whoami");
        return instanceName;
    }

    public String attachment(String key) {
        call("attachment");
        org.apache.dubbo.rpc.RpcContext.getServerContext().setAttachment("served-by", instanceName);
        Object v = org.apache.dubbo.rpc.RpcContext.getServerAttachment().getObjectAttachment(key);
        return v == null ? null : String.valueOf(v);
    }
}
