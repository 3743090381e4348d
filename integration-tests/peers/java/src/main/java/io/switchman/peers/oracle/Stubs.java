package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.rpc.Invocation;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.Result;
import org.apache.dubbo.rpc.RpcInvocation;

/** Invoker stubs, invocations and argument values built from the JSON cases. */
final class Stubs {
    private Stubs() {}

    /** An invoker that only has a URL (what balancers and routers read); never invoked. */
    static final class StubInvoker implements Invoker<Object> {
        private final URL url;

        StubInvoker(URL url) {
            this.url = url;
        }

        @Override
        public Class<Object> getInterface() {
            return Object.class;
        }

        @Override
        public Result invoke(Invocation invocation) {
            throw new UnsupportedOperationException("the oracle never invokes");
        }

        @Override
        public URL getUrl() {
            return url;
        }

        @Override
        public boolean isAvailable() {
            return true;
        }

        @Override
        public void destroy() {}

        @Override
        public String toString() {
            return "StubInvoker(" + url + ")";
        }
    }

    static List<Invoker<Object>> invokers(List<URL> urls) {
        List<Invoker<Object>> list = new ArrayList<>(urls.size());
        for (URL u : urls) {
            list.add(new StubInvoker(u));
        }
        return list;
    }

    static List<URL> urls(JSONArray a) {
        List<URL> list = new ArrayList<>(a.size());
        for (int i = 0; i < a.size(); i++) {
            list.add(URL.valueOf(a.getString(i)));
        }
        return list;
    }

    /** Position of each invoker in its list (identity). */
    static Map<Invoker<Object>, Integer> positions(List<Invoker<Object>> invokers) {
        Map<Invoker<Object>, Integer> pos = new IdentityHashMap<>();
        for (int i = 0; i < invokers.size(); i++) {
            pos.put(invokers.get(i), i);
        }
        return pos;
    }

    /**
     * {@code {"method", "args": [...], "attachments": {k: v}}} as an {@link RpcInvocation} of
     * service {@code service}. JSON integers become Integer (Long when they do not fit), other
     * numbers Double, so {@code String.valueOf} renders them as a Java caller's arguments would.
     */
    static RpcInvocation invocation(JSONObject j, String service) {
        RpcInvocation inv = new RpcInvocation();
        inv.setMethodName(j.getString("method"));
        inv.setServiceName(service);
        JSONArray args = j.getJSONArray("args");
        Object[] values = new Object[args == null ? 0 : args.size()];
        Class<?>[] types = new Class<?>[values.length];
        for (int i = 0; i < values.length; i++) {
            values[i] = javaValue(args.get(i));
            types[i] = values[i] == null ? Object.class : values[i].getClass();
        }
        inv.setArguments(values);
        inv.setParameterTypes(types);
        JSONObject att = j.getJSONObject("attachments");
        if (att != null) {
            for (Map.Entry<String, Object> e : att.entrySet()) {
                inv.setAttachment(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        return inv;
    }

    static Object javaValue(Object v) {
        if (v instanceof BigDecimal) {
            return ((BigDecimal) v).doubleValue();
        }
        if (v instanceof Float) {
            return ((Float) v).doubleValue();
        }
        if (v instanceof BigInteger) {
            BigInteger b = (BigInteger) v;
            return b.bitLength() < 64 ? (Object) b.longValue() : (Object) b.doubleValue();
        }
        if (v instanceof Long) {
            long l = (Long) v;
            if (l >= Integer.MIN_VALUE && l <= Integer.MAX_VALUE) {
                return (int) l;
            }
        }
        return v;
    }
}
