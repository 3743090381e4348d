package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.rpc.cluster.Configurator;
import org.apache.dubbo.rpc.cluster.configurator.parser.ConfigParser;

/**
 * Dubbo's configurators over one provider URL: {@code override://} URLs or configurator YAML
 * ({@code ConfigParser.parseConfigurators}), turned into {@code Configurator}s and sorted by
 * {@code Configurator.toConfigurators} (host, then priority), then applied in that order with
 * {@code configure}, as {@code RegistryDirectory.overrideWithConfigurators} does.
 */
final class Configurators {
    private Configurators() {}

    /**
     * {@code {"provider", "format": "override"|"yaml", "urls"|"text", "watch": [k...]}} →
     * {@code {"weight", "enabled", "params": {k: v|null}, "rules": n}}: the weight parameter
     * (100 when absent), whether {@code RegistryDirectory.toInvokers} would keep the provider
     * ({@code disabled} when present, else {@code enabled}, default true), and the watched
     * parameters.
     */
    static JSONObject configure(JSONObject c) {
        URL url = URL.valueOf(c.getString("provider"));
        List<URL> rules;
        if ("yaml".equals(c.getString("format"))) {
            rules = ConfigParser.parseConfigurators(c.getString("text"));
        } else {
            rules = Stubs.urls(c.getJSONArray("urls"));
        }
        List<Configurator> configurators =
                Configurator.toConfigurators(rules == null ? new ArrayList<>() : rules).orElse(Collections.emptyList());
        for (Configurator cfg : configurators) {
            url = cfg.configure(url);
        }
        JSONObject r = new JSONObject();
        r.put("weight", url.getParameter("weight", 100));
        boolean enabled = url.hasParameter("disabled")
                ? !url.getParameter("disabled", false)
                : url.getParameter("enabled", true);
        r.put("enabled", enabled);
        JSONObject params = new JSONObject();
        JSONArray watch = c.getJSONArray("watch");
        if (watch != null) {
            for (int i = 0; i < watch.size(); i++) {
                String k = watch.getString(i);
                params.put(k, url.getParameter(k));
            }
        }
        r.put("params", params);
        r.put("rules", configurators.size());
        return r;
    }
}
