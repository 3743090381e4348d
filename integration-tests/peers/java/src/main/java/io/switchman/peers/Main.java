package io.switchman.peers;

import java.io.File;
import java.io.PrintStream;

/**
 * Entry point: {@code java -cp ... io.switchman.peers.Main provider|consumer|vectors ...}.
 *
 * <p>The protocol lines (READY, CALL, JSON results) go to the real stdout; everything else a
 * library prints on System.out is sent to stderr with the logs.
 */
public final class Main {
    /** The process's real standard output, for protocol lines only. */
    static final PrintStream STDOUT = System.out;

    private Main() {}

    public static void main(String[] argv) throws Exception {
        System.setOut(System.err);
        quietDefaults();
        if (argv.length == 0) {
            usage();
            System.exit(2);
        }
        if (Boolean.getBoolean("switchman.peer.exitWithParent")) {
            exitWithParent();
        }
        int code;
        try {
            switch (argv[0]) {
                case "provider":
                    code = Provider.run(new Args(argv, 1));
                    break;
                case "consumer":
                    code = Consumer.run(new Args(argv, 1));
                    break;
                case "consumer-serve":
                    code = Consumer.serve(new Args(argv, 1));
                    break;
                case "vectors":
                    code = Vectors.run(argv);
                    break;
                case "oracle": code = io.switchman.peers.oracle.Oracle.run(argv); break;
                case "bench":
                    code = Bench.run(new Args(argv, 1));
                    break;
                case "fleet":
                    code = Fleet.run(new Args(argv, 1));
                    break;
                default:
                    usage();
                    code = 2;
            }
        } catch (IllegalArgumentException e) {
            System.err.println("error: " + e.getMessage());
            usage();
            code = 2;
        }
        STDOUT.flush();
        System.exit(code);
    }

    /**
     * Exits (running the shutdown hooks: a graceful Dubbo shutdown) once stdin reaches end of
     * file: the test process that spawned this peer holds the other end of the pipe, so when it
     * dies, even by SIGKILL, the peer does not outlive it.
     */
    private static void exitWithParent() {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[64];
            try {
                while (System.in.read(buf) != -1) {
                    // Nothing is ever written: wait for the end of the stream.
                }
            } catch (java.io.IOException e) {
                // A broken pipe is the parent gone too.
            }
            STDOUT.flush();
            System.exit(0);
        }, "exit-with-parent");
        t.setDaemon(true);
        t.start();
    }

    /** System properties set before Dubbo or Nacos classes load, unless already given. */
    private static void quietDefaults() {
        setDefault("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        setDefault("org.slf4j.simpleLogger.logFile", "System.err");
        // Dubbo would otherwise probe log4j and JDK logging first and say so on stderr.
        setDefault("dubbo.application.logger", "slf4j");
        // Nacos client: no logback/log4j2 configuration of its own, and its cache files
        // under the temp directory instead of ~/nacos and ~/logs.
        setDefault("nacos.logging.default.config.enabled", "false");
        String tmp = System.getProperty("java.io.tmpdir") + File.separator + "switchman-java-peers-nacos";
        setDefault("JM.LOG.PATH", tmp + File.separator + "logs");
        setDefault("JM.SNAPSHOT.PATH", tmp);
        setDefault("com.alibaba.nacos.naming.cache.dir", tmp + File.separator + "naming");
        // java.util.logging (Nacos's shaded gRPC logs INFO lines through it): warnings only.
        JUL_ROOT.setLevel(java.util.logging.Level.WARNING);
        for (java.util.logging.Handler h : JUL_ROOT.getHandlers()) {
            h.setLevel(java.util.logging.Level.WARNING);
        }
    }

    /** Kept so the JDK does not drop the configured logger. */
    private static final java.util.logging.Logger JUL_ROOT = java.util.logging.Logger.getLogger("");

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    private static void usage() {
        System.err.println(String.join(
                "\n",
                "usage:",
                "  provider --registry URL [--protocol dubbo|tri] [--port N] [--weight W] [--group G]",
                "           [--version V] [--application A] [--register-mode interface|instance|all]",
                "           [--metadata-type local|remote] [--name NAME] [--heartbeat-ms N]",
                "           [--shutdown-wait-ms N] [--param k=v]... [--demo-service v1|v2]",
                "  consumer --registry URL --interface I --method M [--types t1,t2] [--args JSON-array]",
                "           [--group G] [--version V] [--protocol P] [--count N] [--timeout-ms N]",
                "           [--retries N] [--check true|false] [--application A]",
                "           [--migration FORCE_INTERFACE|FORCE_APPLICATION|APPLICATION_FIRST]",
                "           [--cluster C] [--loadbalance L] [--mock M] [--forks N]",
                "  consumer-serve --registry URL --interface I [--application A]",
                "           then one JSON command a line on stdin: {group, cluster, method, types,",
                "           args, count, timeout_ms, retries?}; a JSON line per call, then {\"done\":true}",
                "  fleet --registry URL --interface I --expect-file F --then-file F2 [--timeout-ms N]",
                "           [--provided-by APP] [--migration STEP] [--metadata-report URL]",
                "           (big-fleet benchmark: JSON lines; \"go\" on stdin between the phases)",
                "  vectors encode          (JSON on stdout)",
                "  vectors decode          (JSON on stdin, JSON on stdout)"));
    }
}
