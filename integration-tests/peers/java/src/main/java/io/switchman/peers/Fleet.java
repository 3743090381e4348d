package io.switchman.peers;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.MetadataReportConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.cluster.ClusterInvoker;
import org.apache.dubbo.rpc.cluster.Directory;
import org.apache.dubbo.rpc.service.GenericService;

/**
 * What a Java Dubbo consumer does with a big fleet (the big-fleet benchmark): a generic reference
 * with {@code lazy=true} (no connection to any provider until a call, so fake addresses are never
 * dialled) subscribes to {@code --interface}; a watcher reads its directory's invokers every
 * millisecond. Prints, as JSON lines on stdout:
 *
 * <ul>
 *   <li>{@code {"phase":"first","ms",...}}: from {@code ReferenceConfig.get()} (Dubbo already
 *       started, the JVM warm only from that start) until the directory's addresses are exactly
 *       those of {@code --expect-file} (one {@code host:port} a line), with the JVM's VmRSS and
 *       the heap in use after a full GC;
 *   <li>then waits for a line {@code go} on stdin (the benchmark changes 1% of the fleet when it
 *       has read the first line) and prints {@code {"phase":"change","ms",...}}: from reading
 *       {@code go} until the addresses are exactly those of {@code --then-file}, with VmHWM.
 * </ul>
 *
 * <p>{@code --provided-by APP --migration FORCE_APPLICATION --metadata-report URL} for
 * application-level fleets.
 */
final class Fleet {
    private Fleet() {}

    static int run(Args a) throws Exception {
        PrintStream out = Main.STDOUT;
        String registry = a.require("registry");
        String iface = a.require("interface");
        Set<String> first = read(a.require("expect-file"));
        Set<String> then = read(a.require("then-file"));
        long timeoutMs = a.getInt("timeout-ms", 300_000);
        String migration = a.get("migration", null);
        if (migration != null) {
            System.setProperty("dubbo.application.migration.step", migration);
            System.setProperty("dubbo.application.service-discovery.migration", migration);
        }

        ApplicationConfig app = new ApplicationConfig(a.get("application", "switchman-java-fleet"));
        app.setQosEnable(false);
        app.setEnableFileCache(false);
        app.setShutwait("0");
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(app)
                .registry(new RegistryConfig(registry));
        if (a.has("metadata-report")) {
            bootstrap.metadataReport(new MetadataReportConfig(a.get("metadata-report", null)));
        }
        bootstrap.start();

        ReferenceConfig<GenericService> ref = new ReferenceConfig<>();
        ref.setInterface(iface);
        ref.setGeneric("true");
        ref.setCheck(false);
        ref.setLazy(true);
        if (a.has("provided-by")) {
            ref.setProvidedBy(a.get("provided-by", null));
        }
        if (migration != null) {
            Map<String, String> p = new HashMap<>();
            p.put("migration.step", migration);
            ref.setParameters(p);
        }
        long t0 = System.nanoTime();
        ref.get();
        if (!await(ref, first, t0, timeoutMs)) {
            out.println("{\"ok\":false,\"phase\":\"first\",\"seen\":" + count(ref) + "}");
            out.flush();
            return 1;
        }
        long firstMs = (System.nanoTime() - t0) / 1_000_000;
        long rss = status("VmRSS:");
        System.gc();
        Runtime rt = Runtime.getRuntime();
        long heapKb = (rt.totalMemory() - rt.freeMemory()) / 1024;
        out.println("{\"ok\":true,\"phase\":\"first\",\"ms\":" + firstMs + ",\"rss_kb\":" + rss
                + ",\"heap_kb\":" + heapKb + "}");
        out.flush();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        if (line == null || !line.trim().equals("go")) {
            return 2;
        }
        long t1 = System.nanoTime();
        if (!await(ref, then, t1, timeoutMs)) {
            out.println("{\"ok\":false,\"phase\":\"change\",\"seen\":" + count(ref) + "}");
            out.flush();
            return 1;
        }
        long changeMs = (System.nanoTime() - t1) / 1_000_000;
        out.println("{\"ok\":true,\"phase\":\"change\",\"ms\":" + changeMs + ",\"hwm_kb\":"
                + status("VmHWM:") + "}");
        out.flush();
        return 0;
    }

    private static Set<String> read(String file) throws Exception {
        Set<String> s = new HashSet<>();
        for (String l : Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8)) {
            if (!l.trim().isEmpty()) {
                s.add(l.trim());
            }
        }
        return s;
    }

    /** The directory's invokers now (empty while the reference has none yet). */
    private static List<? extends Invoker<?>> invokers(ReferenceConfig<GenericService> ref) {
        try {
            Invoker<?> invoker = ref.getInvoker();
            if (invoker instanceof ClusterInvoker) {
                Directory<?> dir = ((ClusterInvoker<?>) invoker).getDirectory();
                if (dir != null) {
                    return dir.getAllInvokers();
                }
            }
        } catch (RuntimeException e) {
            // The migration invoker has no current invoker yet.
        }
        return java.util.Collections.emptyList();
    }

    private static int count(ReferenceConfig<GenericService> ref) {
        return invokers(ref).size();
    }

    /**
     * Polls the directory every millisecond until its addresses are exactly {@code want}; builds
     * the address set only when the list is another object than last time.
     */
    private static boolean await(
            ReferenceConfig<GenericService> ref, Set<String> want, long t0, long timeoutMs)
            throws InterruptedException {
        Object last = null;
        while ((System.nanoTime() - t0) / 1_000_000 < timeoutMs) {
            List<? extends Invoker<?>> list = invokers(ref);
            if (list != last && list.size() == want.size()) {
                Set<String> have = new HashSet<>(list.size() * 2);
                for (Invoker<?> i : list) {
                    have.add(i.getUrl().getAddress());
                }
                if (have.equals(want)) {
                    return true;
                }
            }
            last = list;
            Thread.sleep(1);
        }
        return false;
    }

    private static long status(String field) {
        try {
            for (String l : Files.readAllLines(Paths.get("/proc/self/status"), StandardCharsets.UTF_8)) {
                if (l.startsWith(field)) {
                    return Long.parseLong(l.substring(field.length()).trim().split("\\s+")[0]);
                }
            }
        } catch (Exception e) {
            // Not Linux.
        }
        return -1;
    }
}
