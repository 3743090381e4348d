package io.switchman.peers.idl;

import java.io.PrintStream;

import org.apache.dubbo.common.stream.StreamObserver;

/**
 * The protobuf (IDL) service of {@code src/main/proto/greeter.proto}, on the stub Dubbo's
 * compiler plugin generated ({@link DubboGreeterTriple.GreeterImplBase}). Exported by
 * {@code provider --service idl}; every call prints {@code CALL <instanceName> <rpc>} (the proto
 * method name) before it answers, as DemoService's calls do.
 */
public final class IdlGreeter extends DubboGreeterTriple.GreeterImplBase {
    private final String instanceName;
    private final PrintStream out;

    public IdlGreeter(String instanceName, PrintStream out) {
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
    public HelloReply sayHello(HelloRequest request) {
        call("SayHello");
        String one = "hello, " + request.getName() + " from " + instanceName;
        StringBuilder message = new StringBuilder(one);
        for (int i = 1; i < request.getTimes(); i++) {
            message.append("; ").append(one);
        }
        return HelloReply.newBuilder()
                .setMessage(message.toString())
                .setInstance(instanceName)
                .addAllTags(request.getTagsList())
                .setLength(request.getName().length())
                .build();
    }

    @Override
    public HelloReply fail(HelloRequest request) {
        call("Fail");
        throw new IllegalStateException("refused: " + request.getName());
    }

    @Override
    public HelloReply ping(Empty request) {
        call("Ping");
        return HelloReply.newBuilder().setInstance(instanceName).build();
    }

    @Override
    public void count(HelloRequest request, StreamObserver<HelloReply> replies) {
        call("Count");
        boolean slow = request.getTagsList().contains("slow");
        int n = Math.max(1, request.getTimes());
        for (int i = 1; i <= n; i++) {
            if (slow) {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
            replies.onNext(HelloReply.newBuilder()
                    .setMessage("hello, " + request.getName() + " #" + i + " from " + instanceName)
                    .setInstance(instanceName)
                    .addAllTags(request.getTagsList())
                    .setLength(i)
                    .build());
        }
        if (request.getTagsList().contains("fail")) {
            replies.onError(new IllegalStateException("refused: " + request.getName()));
            return;
        }
        replies.onCompleted();
    }
}
