package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.rpc.Invocation;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.RpcInvocation;
import org.apache.dubbo.rpc.RpcStatus;
import org.apache.dubbo.rpc.cluster.LoadBalance;
import org.apache.dubbo.rpc.cluster.directory.StaticDirectory;
import org.apache.dubbo.rpc.cluster.loadbalance.AbstractLoadBalance;
import org.apache.dubbo.rpc.cluster.loadbalance.ConsistentHashLoadBalance;
import org.apache.dubbo.rpc.cluster.loadbalance.LeastActiveLoadBalance;
import org.apache.dubbo.rpc.cluster.loadbalance.RandomLoadBalance;
import org.apache.dubbo.rpc.cluster.loadbalance.RoundRobinLoadBalance;
import org.apache.dubbo.rpc.cluster.loadbalance.ShortestResponseLoadBalance;
import org.apache.dubbo.rpc.model.ApplicationModel;

/**
 * Dubbo's load balancers ({@code RandomLoadBalance}, {@code RoundRobinLoadBalance},
 * {@code LeastActiveLoadBalance}, {@code ShortestResponseLoadBalance},
 * {@code ConsistentHashLoadBalance}) and {@code AbstractLoadBalance.getWeight} (warm-up).
 *
 * <p>Dubbo reads the clock itself ({@code System.currentTimeMillis()} against the provider's
 * {@code timestamp}). A case gives uptimes instead; the provider URLs get
 * {@code timestamp = now - uptime} and the answer is kept only when the clock did not move
 * in a way that changes a weight (otherwise the case is run again).
 */
final class Balancers {
    private Balancers() {}

    private static final int ATTEMPTS = 20;

    /** Exposes the protected {@code getWeight} (warm-up included) of Dubbo's base class. */
    static final class WeightProbe extends AbstractLoadBalance {
        int weight(Invoker<?> invoker, Invocation invocation) {
            return getWeight(invoker, invocation);
        }

        @Override
        protected <T> Invoker<T> doSelect(List<Invoker<T>> invokers, URL url, Invocation invocation) {
            throw new UnsupportedOperationException();
        }
    }

    private static final WeightProbe PROBE = new WeightProbe();

    /** The provider URL text with {@code timestamp = now - uptime} appended (when uptime given). */
    static URL withTimestamp(String url, Object uptime, long now) {
        if (uptime == null) {
            return URL.valueOf(url);
        }
        long ts = now - ((Number) uptime).longValue();
        return URL.valueOf(url + (url.contains("?") ? "&" : "?") + "timestamp=" + ts);
    }

    /** {@code {"provider", "uptime_ms", "method"}} → {@code {"weight"}}. */
    static JSONObject warmup(JSONObject c) {
        RpcInvocation inv = new RpcInvocation();
        inv.setMethodName(c.getString("method"));
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            long t0 = System.currentTimeMillis();
            Invoker<Object> invoker = new Stubs.StubInvoker(withTimestamp(c.getString("provider"), c.get("uptime_ms"), t0));
            int w = PROBE.weight(invoker, inv);
            if (System.currentTimeMillis() == t0) {
                JSONObject r = new JSONObject();
                r.put("weight", w);
                return r;
            }
        }
        throw new IllegalStateException("the clock kept moving during getWeight");
    }

    static LoadBalance balancer(String name) {
        switch (name) {
            case "random":
                return new RandomLoadBalance();
            case "roundrobin":
                return new RoundRobinLoadBalance();
            case "leastactive":
                return new LeastActiveLoadBalance();
            case "shortestresponse": {
                ShortestResponseLoadBalance lb = new ShortestResponseLoadBalance();
                lb.setApplicationModel(ApplicationModel.defaultModel());
                return lb;
            }
            case "consistenthash":
                return new ConsistentHashLoadBalance();
            default:
                throw new IllegalArgumentException("unknown balancer " + name);
        }
    }

    /**
     * {@code {"balancer", "consumer", "providers", "uptimes_ms", "stats", "invocations", "mode",
     * "picks"}} → {@code {"picks": [i...]}} (mode {@code sequence}: one pick per invocation, in
     * order) or {@code {"histogram": [n...]}} (mode {@code histogram}: {@code picks} picks of the
     * first invocation), plus {@code "weights"}: getWeight of every provider for the first
     * invocation. With {@code "tried"} the picks are retries (see {@link #picker}).
     */
    static JSONObject loadBalance(JSONObject c) {
        JSONArray providers = c.getJSONArray("providers");
        JSONArray uptimes = c.getJSONArray("uptimes_ms");
        String service = c.getString("service");
        URL consumer = URL.valueOf(c.getString("consumer"));
        JSONArray invJson = c.getJSONArray("invocations");
        List<RpcInvocation> invocations = new ArrayList<>();
        for (int i = 0; i < invJson.size(); i++) {
            invocations.add(Stubs.invocation(invJson.getJSONObject(i), service));
        }
        String mode = c.getString("mode");
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            long now = System.currentTimeMillis();
            List<URL> urls = new ArrayList<>();
            for (int i = 0; i < providers.size(); i++) {
                urls.add(withTimestamp(providers.getString(i), uptimes == null ? null : uptimes.get(i), now));
            }
            List<Invoker<Object>> invokers = Stubs.invokers(urls);
            Map<Invoker<Object>, Integer> pos = Stubs.positions(invokers);
            String method = invocations.get(0).getMethodName();
            try {
                record(c.getJSONArray("stats"), urls, method);
                int[] before = weights(invokers, invocations.get(0));
                LoadBalance lb = balancer(c.getString("balancer"));
                Picker picker = picker(c, consumer, invokers, lb);
                JSONObject r = new JSONObject();
                if ("sequence".equals(mode)) {
                    JSONArray picks = new JSONArray();
                    for (RpcInvocation inv : invocations) {
                        picks.add(pos.get(picker.pick(inv)));
                    }
                    r.put("picks", picks);
                } else {
                    int n = c.getIntValue("picks");
                    int[] counts = new int[invokers.size()];
                    RpcInvocation inv = invocations.get(0);
                    for (int k = 0; k < n; k++) {
                        counts[pos.get(picker.pick(inv))]++;
                    }
                    JSONArray h = new JSONArray();
                    for (int x : counts) {
                        h.add(x);
                    }
                    r.put("histogram", h);
                }
                int[] after = weights(invokers, invocations.get(0));
                if (Arrays.equals(before, after)) {
                    JSONArray w = new JSONArray();
                    for (int x : before) {
                        w.add(x);
                    }
                    r.put("weights", w);
                    return r;
                }
            } finally {
                for (URL u : urls) {
                    RpcStatus.removeStatus(u);
                    RpcStatus.removeStatus(u, method);
                }
            }
        }
        throw new IllegalStateException("warm-up weights kept changing during the case");
    }

    /** One pick of a case. */
    interface Picker {
        Invoker<Object> pick(Invocation inv);
    }

    /**
     * {@code LoadBalance.select}, or, when the case has {@code "tried": [i...]} (a retry),
     * {@code AbstractClusterInvoker.select} with those invokers as already selected (Dubbo's
     * reselect), through a {@link ClusterProbe} over a {@code StaticDirectory}.
     */
    private static Picker picker(JSONObject c, URL consumer, List<Invoker<Object>> invokers, LoadBalance lb) {
        JSONArray tried = c.getJSONArray("tried");
        if (tried == null) {
            return inv -> lb.select(invokers, consumer, inv);
        }
        List<Invoker<Object>> selected = new ArrayList<>();
        for (int i = 0; i < tried.size(); i++) {
            selected.add(invokers.get(tried.getIntValue(i)));
        }
        ClusterProbe<Object> probe = new ClusterProbe<>(new StaticDirectory<>(consumer, invokers));
        return inv -> probe.pick(lb, inv, invokers, selected);
    }

    private static int[] weights(List<Invoker<Object>> invokers, Invocation inv) {
        int[] w = new int[invokers.size()];
        for (int i = 0; i < w.length; i++) {
            w[i] = PROBE.weight(invokers.get(i), inv);
        }
        return w;
    }

    /**
     * Per provider {@code {"active": n, "succeeded_ms": [..], "failed_ms": [..]}}: finished calls
     * (RpcStatus.beginCount + endCount) and then {@code active} calls left in flight.
     */
    private static void record(JSONArray stats, List<URL> urls, String method) {
        if (stats == null) {
            return;
        }
        for (int i = 0; i < stats.size() && i < urls.size(); i++) {
            JSONObject s = stats.getJSONObject(i);
            URL u = urls.get(i);
            JSONArray ok = s.getJSONArray("succeeded_ms");
            if (ok != null) {
                for (int k = 0; k < ok.size(); k++) {
                    RpcStatus.beginCount(u, method);
                    RpcStatus.endCount(u, method, ok.getLongValue(k), true);
                }
            }
            JSONArray failed = s.getJSONArray("failed_ms");
            if (failed != null) {
                for (int k = 0; k < failed.size(); k++) {
                    RpcStatus.beginCount(u, method);
                    RpcStatus.endCount(u, method, failed.getLongValue(k), false);
                }
            }
            int active = s.getIntValue("active");
            for (int k = 0; k < active; k++) {
                RpcStatus.beginCount(u, method);
            }
        }
    }
}
