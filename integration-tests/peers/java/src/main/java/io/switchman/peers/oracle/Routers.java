package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.common.config.configcenter.ConfigChangeType;
import org.apache.dubbo.common.config.configcenter.ConfigChangedEvent;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.RpcInvocation;
import org.apache.dubbo.rpc.cluster.router.condition.ConditionStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.AppStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.ListenableStateRouter;
import org.apache.dubbo.rpc.cluster.router.condition.config.ServiceStateRouter;
import org.apache.dubbo.rpc.cluster.router.state.BitList;
import org.apache.dubbo.rpc.cluster.router.state.StateRouter;
import org.apache.dubbo.rpc.cluster.router.state.TailStateRouter;
import org.apache.dubbo.rpc.cluster.router.tag.TagStateRouter;

/**
 * Dubbo's state routers as its {@code RouterChain} orders them: {@code TagStateRouter} (always
 * present, so static provider tags apply without a rule), then the condition rules in the order
 * given (service scope before application scope, as the generator emits them).
 *
 * <ul>
 *   <li>{@code v2}: condition text, one {@code ConditionStateRouter(consumer, line, false, true)}
 *       per line, each seeing the previous one's output (as a v3.0 {@code conditions:} list runs
 *       them); a line that does not parse voids the whole rule, as in a v3.0 list.
 *   <li>{@code v2url}: one {@code condition://} URL, {@code new ConditionStateRouter(URL)}.
 *   <li>{@code yaml}: v3.0/v3.1 condition YAML through {@code ServiceStateRouter} or
 *       {@code AppStateRouter} ({@code ListenableStateRouter.process}).
 *   <li>{@code tag}: tag YAML through {@code TagStateRouter.process}, after {@code notify} with
 *       the providers (v3.0 {@code match} selectors read them).
 * </ul>
 *
 * As in Dubbo's chain, an empty result ends the chain (should-fail-fast, the default).
 */
final class Routers {
    private Routers() {}

    /**
     * {@code {"consumer", "service", "providers", "rules", "invocation", "samples"}} →
     * {@code {"routes": {"0,2,3": count, "": count, ...}}}: the routed provider indexes of each
     * of {@code samples} runs (ascending, comma-joined; empty = no provider).
     */
    static JSONObject route(JSONObject c) {
        URL consumer = URL.valueOf(c.getString("consumer"));
        List<URL> urls = Stubs.urls(c.getJSONArray("providers"));
        List<Invoker<Object>> invokers = Stubs.invokers(urls);
        Map<Invoker<Object>, Integer> pos = Stubs.positions(invokers);
        BitList<Invoker<Object>> all = new BitList<>(invokers);
        RpcInvocation inv = Stubs.invocation(c.getJSONObject("invocation"), c.getString("service"));

        List<StateRouter<Object>> chain = new ArrayList<>();
        TagStateRouter<Object> tag = new TagStateRouter<>(consumer);
        tag.notify(all.clone());
        chain.add(tag);
        JSONArray rules = c.getJSONArray("rules");
        for (int i = 0; i < rules.size(); i++) {
            JSONObject rule = rules.getJSONObject(i);
            String key = rule.getString("key");
            String text = rule.getString("text");
            switch (rule.getString("format")) {
                case "tag":
                    tag.process(new ConfigChangedEvent(key, "dubbo", text, ConfigChangeType.ADDED));
                    break;
                case "v2": {
                    List<StateRouter<Object>> lines = new ArrayList<>();
                    try {
                        for (String line : text.split("\n")) {
                            if (!line.trim().isEmpty()) {
                                lines.add(new ConditionStateRouter<>(consumer, line, false, true));
                            }
                        }
                        chain.addAll(lines);
                    } catch (RuntimeException e) {
                        // The rule does not parse: not in force.
                    }
                    break;
                }
                case "v2url":
                    try {
                        chain.add(new ConditionStateRouter<>(URL.valueOf(text)));
                    } catch (RuntimeException e) {
                        // The rule does not parse: not in force.
                    }
                    break;
                case "yaml": {
                    ListenableStateRouter<Object> r = "application".equals(rule.getString("scope"))
                            ? new AppStateRouter<>(consumer)
                            : new ServiceStateRouter<>(consumer);
                    // Parse errors are caught and logged by Dubbo: the rule is then not in force.
                    r.process(new ConfigChangedEvent(key, "dubbo", text, ConfigChangeType.ADDED));
                    chain.add(r);
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown rule format " + rule.getString("format"));
            }
        }
        for (int i = 0; i < chain.size(); i++) {
            chain.get(i).setNextRouter(i + 1 < chain.size() ? chain.get(i + 1) : TailStateRouter.getInstance());
        }

        int samples = Math.max(1, c.getIntValue("samples"));
        Map<String, Integer> routes = new TreeMap<>();
        for (int s = 0; s < samples; s++) {
            BitList<Invoker<Object>> out = chain.get(0).route(all.clone(), consumer, inv, false, null);
            boolean[] kept = new boolean[invokers.size()];
            for (Invoker<Object> i : out) {
                kept[pos.get(i)] = true;
            }
            StringBuilder key = new StringBuilder();
            for (int i = 0; i < kept.length; i++) {
                if (kept[i]) {
                    if (key.length() > 0) {
                        key.append(',');
                    }
                    key.append(i);
                }
            }
            routes.merge(key.toString(), 1, Integer::sum);
        }
        JSONObject r = new JSONObject();
        r.put("routes", new JSONObject(new java.util.LinkedHashMap<>(routes)));
        return r;
    }
}
