package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSONObject;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.common.utils.UrlUtils;
import org.apache.dubbo.registry.nacos.NacosServiceName;

/**
 * Which providers a consumer's interface, group and version accept.
 *
 * <ul>
 *   <li>{@code ismatch}: {@code UrlUtils.isMatch(consumerUrl, providerUrl)}, the filter every
 *       registry applies to the URLs it notifies (ZooKeeper, Nacos, the directory).
 *   <li>{@code nacos}: what the Nacos registry selects: by service name first (a concrete
 *       consumer name, {@code providers:I:V:G}, subscribes to exactly that name; a wildcard or
 *       list uses {@code NacosServiceName.isCompatible}), then {@code UrlUtils.isMatch}.
 * </ul>
 */
final class ServiceKeys {
    private ServiceKeys() {}

    static URL url(String base, JSONObject key) {
        String iface = key.getString("interface");
        StringBuilder sb = new StringBuilder(base).append(iface).append("?interface=").append(iface);
        String group = key.getString("group");
        if (group != null && !group.isEmpty()) {
            sb.append("&group=").append(group);
        }
        String version = key.getString("version");
        if (version != null && !version.isEmpty()) {
            sb.append("&version=").append(version);
        }
        return URL.valueOf(sb.toString());
    }

    /** {@code {"flavor", "consumer": {interface, group, version}, "provider": {...}}} → {@code {"match"}}. */
    static JSONObject match(JSONObject c) {
        // A consumer subscribes to the providers category (Nacos names need a category when the
        // interface is "*").
        URL consumer = url("consumer://10.0.9.9/", c.getJSONObject("consumer")).addParameter("category", "providers");
        URL provider = url("dubbo://10.0.0.1:20880/", c.getJSONObject("provider"));
        boolean match = UrlUtils.isMatch(consumer, provider);
        if ("nacos".equals(c.getString("flavor"))) {
            NacosServiceName wanted = new NacosServiceName(consumer);
            NacosServiceName have = new NacosServiceName(provider);
            boolean byName = wanted.isConcrete() ? wanted.getValue().equals(have.getValue()) : wanted.isCompatible(have);
            match = byName && match;
        }
        JSONObject r = new JSONObject();
        r.put("match", match);
        return r;
    }
}
