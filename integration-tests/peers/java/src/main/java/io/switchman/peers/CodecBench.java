package io.switchman.peers;

import java.util.ArrayList;
import java.util.List;

/**
 * {@code vectors bench [seconds]}: hessian-lite's cost per object, as Dubbo pays it per call
 * ({@link Vectors#encode}: a fresh {@code ObjectOutput} of Dubbo's "hessian2" serialization,
 * {@code writeObject}, {@code flushBuffer}; {@link Vectors#decode}: a fresh {@code ObjectInput},
 * {@code readObject}) and both in turn (what one value costs a call: written on one side, read
 * on the other), for {@code User.sample(7)} and a list of 100 users. Each case warms up
 * for {@code seconds}, then is timed for {@code seconds}; prints one JSON line per case:
 * {@code {"case": "user/encode", "ns": ..., "bytes": ...}}.
 */
final class CodecBench {
    private CodecBench() {}

    /** Keeps results alive so the JIT cannot drop the work. */
    static volatile Object sink;

    interface Op {
        Object run() throws Exception;
    }

    static int run(String[] argv) throws Exception {
        double seconds = argv.length > 2 ? Double.parseDouble(argv[2]) : 2.0;
        Object user = User.sample(7);
        List<User> list = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            list.add(User.sample(i));
        }
        for (Object[] c : new Object[][] {{"user", user}, {"list100", list}}) {
            String name = (String) c[0];
            Object value = c[1];
            byte[] bytes = Vectors.encode(value);
            time(name + "/encode", bytes.length, seconds, () -> Vectors.encode(value));
            time(name + "/decode", bytes.length, seconds, () -> Vectors.decode(bytes));
            time(name + "/encode+decode", bytes.length, seconds,
                    () -> Vectors.decode(Vectors.encode(value)));
        }
        return 0;
    }

    private static void time(String name, int bytes, double seconds, Op op) throws Exception {
        long budget = (long) (seconds * 1e9);
        long start = System.nanoTime();
        while (System.nanoTime() - start < budget) {
            sink = op.run();
        }
        long n = 0;
        start = System.nanoTime();
        long now = start;
        while (now - start < budget) {
            for (int i = 0; i < 100; i++) {
                sink = op.run();
            }
            n += 100;
            now = System.nanoTime();
        }
        Main.STDOUT.println("{\"case\":\"" + name + "\",\"ns\":" + ((double) (now - start) / n)
                + ",\"bytes\":" + bytes + "}");
        Main.STDOUT.flush();
    }
}
