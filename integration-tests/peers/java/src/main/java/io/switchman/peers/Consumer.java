package io.switchman.peers;

import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.RpcException;
import org.apache.dubbo.rpc.StatusRpcException;
import org.apache.dubbo.rpc.service.GenericException;
import org.apache.dubbo.rpc.service.GenericService;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Calls one method through a registry with Dubbo's own ReferenceConfig and generic invocation
 * ({@code GenericService.$invoke}); prints one JSON line per call.
 */
final class Consumer {
    private Consumer() {}

    static int run(Args a) throws Exception {
        LoopbackConfiguratorFactory.pinLocalHost();
        PrintStream out = Main.STDOUT;
        String registry = a.require("registry");
        String iface = a.require("interface");
        String method = a.require("method");
        List<String> typeList = new ArrayList<>();
        for (String t : a.get("types", "").split(",")) {
            if (!t.trim().isEmpty()) {
                typeList.add(t.trim());
            }
        }
        String[] types = typeList.toArray(new String[0]);
        Object parsed = Json.parse(a.get("args", "[]"));
        if (!(parsed instanceof List)) {
            throw new IllegalArgumentException("--args must be a JSON array");
        }
        Object[] args = ((List<?>) parsed).toArray();
        if (args.length != types.length) {
            throw new IllegalArgumentException(
                    "--types has " + types.length + " entries but --args has " + args.length);
        }
        int count = a.getInt("count", 1);

        String migration = a.get("migration", a.get("register-mode", null));
        if (migration != null) {
            System.setProperty("dubbo.application.migration.step", migration);
            System.setProperty("dubbo.application.service-discovery.migration", migration);
        }

        ApplicationConfig app = new ApplicationConfig(a.get("application", "switchman-java-consumer"));
        app.setQosEnable(false);
        app.setEnableFileCache(false);
        app.setShutwait("0");

        ReferenceConfig<GenericService> ref = new ReferenceConfig<>();
        ref.setInterface(iface);
        ref.setGeneric("true");
        if (a.has("group")) {
            ref.setGroup(a.get("group", null));
        }
        if (a.has("version")) {
            ref.setVersion(a.get("version", null));
        }
        if (a.has("protocol")) {
            ref.setProtocol(a.get("protocol", null));
        }
        if (a.has("timeout-ms")) {
            ref.setTimeout(a.getInt("timeout-ms", null));
        }
        if (a.has("retries")) {
            ref.setRetries(a.getInt("retries", null));
        }
        if (a.has("check")) {
            ref.setCheck(Boolean.parseBoolean(a.get("check", "true")));
        }
        // The applications that provide the interface (Dubbo's providedBy: no mapping lookup).
        if (a.has("provided-by")) {
            ref.setProvidedBy(a.get("provided-by", null));
        }
        // The scenario oracle's settings: the cluster strategy and what it reads.
        if (a.has("cluster")) {
            ref.setCluster(a.get("cluster", null));
        }
        if (a.has("loadbalance")) {
            ref.setLoadbalance(a.get("loadbalance", null));
        }
        if (a.has("mock")) {
            ref.setMock(a.get("mock", null));
        }
        if (a.has("forks")) {
            Map<String, String> p = new HashMap<>();
            p.put("forks", a.get("forks", null));
            ref.setParameters(p);
        }
        if (migration != null) {
            Map<String, String> p = new HashMap<>();
            p.put("migration.step", migration);
            ref.setParameters(p);
        }

        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(app)
                .registry(new RegistryConfig(registry))
                .reference(ref);
        boolean allOk = true;
        try {
            bootstrap.start();
            GenericService service = ref.get();
            for (int i = 0; i < count; i++) {
                String line;
                try {
                    Object result = service.$invoke(method, types, args);
                    line = "{\"ok\":true,\"result\":" + Json.write(result) + "}";
                } catch (Throwable t) {
                    allOk = false;
                    line = failure(t);
                }
                out.println(line);
                out.flush();
            }
        } catch (Throwable t) {
            // The reference itself failed (e.g. check=true and no provider).
            out.println(failure(t));
            out.flush();
            allOk = false;
        }
        try {
            bootstrap.destroy();
        } catch (Throwable t) {
            System.err.println("[java-peer] consumer shutdown: " + t);
        }
        return allOk ? 0 : 1;
    }

    /**
     * One JVM for many runs (the scenario oracle): starts Dubbo once, then reads one JSON
     * command a line from stdin ({@code {"group", "cluster", "method", "types": [...], "args":
     * [...], "count", "timeout_ms", "retries"?}}), makes a fresh generic reference with those
     * settings, prints one JSON line per call as {@link #run} does, then {@code {"done":true}},
     * and destroys the reference (which also stops failback's background retries). Ends at
     * the end of stdin.
     *
     * <p>With {@code "keep": true} the reference is kept for later commands with the same
     * group, cluster, timeout and retries (a consumer that runs while a rule is pushed to it);
     * {@code "count": 0} only makes it. {@code {"release": true}} destroys every kept one.
     */
    static int serve(Args a) throws Exception {
        LoopbackConfiguratorFactory.pinLocalHost();
        PrintStream out = Main.STDOUT;
        String registry = a.require("registry");
        String iface = a.require("interface");
        ApplicationConfig app = new ApplicationConfig(a.get("application", "switchman-java-consumer"));
        app.setQosEnable(false);
        app.setEnableFileCache(false);
        app.setShutwait("0");
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(app)
                .registry(new RegistryConfig(registry));
        bootstrap.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        Map<String, ReferenceConfig<GenericService>> kept = new java.util.HashMap<>();
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) {
                continue;
            }
            Map<?, ?> cmd = (Map<?, ?>) Json.parse(line);
            if (Boolean.TRUE.equals(cmd.get("release"))) {
                for (ReferenceConfig<GenericService> r : kept.values()) {
                    destroy(r);
                }
                kept.clear();
                out.println("{\"done\":true}");
                out.flush();
                continue;
            }
            boolean keep = Boolean.TRUE.equals(cmd.get("keep"));
            String key = cmd.get("group") + "/" + cmd.get("cluster") + "/" + cmd.get("timeout_ms") + "/"
                    + cmd.get("retries");
            ReferenceConfig<GenericService> ref = keep ? kept.get(key) : null;
            if (ref == null) {
                ref = new ReferenceConfig<>();
                ref.setInterface(iface);
                ref.setGeneric("true");
                ref.setGroup((String) cmd.get("group"));
                ref.setCluster((String) cmd.get("cluster"));
                ref.setTimeout(((Number) cmd.get("timeout_ms")).intValue());
                if (cmd.get("retries") != null) {
                    ref.setRetries(((Number) cmd.get("retries")).intValue());
                }
                if (keep) {
                    kept.put(key, ref);
                }
            }
            List<?> typeList = (List<?>) cmd.get("types");
            String[] types = typeList.stream().map(String::valueOf).toArray(String[]::new);
            Object[] args = ((List<?>) cmd.get("args")).toArray();
            String method = (String) cmd.get("method");
            int count = ((Number) cmd.get("count")).intValue();
            try {
                GenericService service = ref.get();
                for (int i = 0; i < count; i++) {
                    String result;
                    try {
                        Object r = service.$invoke(method, types, args);
                        result = "{\"ok\":true,\"result\":" + Json.write(r) + "}";
                    } catch (Throwable t) {
                        result = failure(t);
                    }
                    out.println(result);
                    out.flush();
                }
            } catch (Throwable t) {
                out.println(failure(t));
            } finally {
                if (!keep) {
                    destroy(ref);
                }
            }
            out.println("{\"done\":true}");
            out.flush();
        }
        try {
            bootstrap.destroy();
        } catch (Throwable t) {
            System.err.println("[java-peer] consumer shutdown: " + t);
        }
        return 0;
    }

    private static void destroy(ReferenceConfig<GenericService> ref) {
        try {
            ref.destroy();
        } catch (Throwable t) {
            System.err.println("[java-peer] reference destroy: " + t);
        }
    }

    private static String failure(Throwable t) {
        return "{\"ok\":false,\"error\":" + Json.write(describe(t))
                + ",\"kind\":" + Json.write(kind(t)) + "}";
    }

    /**
     * What kind of failure {@code t} is, in the scenario oracle's words: {@code business} (the
     * provider threw), else a Triple status's ({@code DEADLINE_EXCEEDED}: {@code timeout},
     * {@code UNAVAILABLE}: {@code network}), else by the first {@link RpcException}'s code in
     * the cause chain:
     * {@code timeout}, {@code network}, {@code forbidden}, {@code limit}, {@code no-provider},
     * {@code serialization}; {@code other} for anything else.
     */
    static String kind(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof GenericException) {
                return "business";
            }
            if (c.getCause() == c) {
                break;
            }
        }
        // A Triple status anywhere in the chain says what the call ended in (Java sometimes
        // wraps it in an ExecutionException inside an RpcException of code 0).
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof StatusRpcException) {
                switch (((StatusRpcException) c).getStatus().code) {
                    case DEADLINE_EXCEEDED:
                        return "timeout";
                    case UNAVAILABLE:
                        return "network";
                    default:
                        break;
                }
            }
            if (c.getCause() == c) {
                break;
            }
        }
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof RpcException) {
                RpcException r = (RpcException) c;
                if (r.isTimeout()) {
                    return "timeout";
                }
                if (r.isNetwork()) {
                    return "network";
                }
                if (r.isBiz()) {
                    return "business";
                }
                if (r.isForbidden()) {
                    return r.getMessage() != null && r.getMessage().contains("No provider")
                            ? "no-provider" : "forbidden";
                }
                if (r.isLimitExceed()) {
                    return "limit";
                }
                if (r.isNoInvokerAvailableAfterFilter()) {
                    return "no-provider";
                }
                if (r.isSerialization()) {
                    return "serialization";
                }
                return "other";
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return "other";
    }

    /** {@code "<class>: <message>"}; for an exception the provider threw, its own class. */
    static String describe(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof GenericException) {
                GenericException g = (GenericException) c;
                return g.getExceptionClass() + ": " + g.getExceptionMessage();
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return t.getClass().getName() + ": " + t.getMessage();
    }
}
