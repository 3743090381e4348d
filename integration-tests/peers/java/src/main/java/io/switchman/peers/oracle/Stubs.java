package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
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
     * {@code {"method", "args": [...], "types": [...], "attachments": {k: v}}} as an
     * {@link RpcInvocation} of service {@code service}. Without {@code types}, JSON integers
     * become Integer (Long when they do not fit), other numbers Double, so
     * {@code String.valueOf} renders them as a Java caller's arguments would. With
     * {@code types} (Java parameter types, one per argument), each argument becomes the object
     * of that type ({@link #typedValue}) and the types are set with {@code setParameterTypes}.
     */
    static RpcInvocation invocation(JSONObject j, String service) {
        RpcInvocation inv = new RpcInvocation();
        inv.setMethodName(j.getString("method"));
        inv.setServiceName(service);
        JSONArray args = j.getJSONArray("args");
        JSONArray declared = j.getJSONArray("types");
        Object[] values = new Object[args == null ? 0 : args.size()];
        Class<?>[] types = new Class<?>[values.length];
        for (int i = 0; i < values.length; i++) {
            String type = declared == null || i >= declared.size() ? null : declared.getString(i);
            if (type == null) {
                values[i] = javaValue(args.get(i));
                types[i] = values[i] == null ? Object.class : values[i].getClass();
            } else {
                values[i] = typedValue(args.get(i), type);
                types[i] = typeClass(type);
            }
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

    /** A type name without its generic arguments ({@code java.util.List<X>} → {@code java.util.List}). */
    static String erasure(String type) {
        int lt = type.indexOf('<');
        return (lt < 0 ? type : type.substring(0, lt)).trim();
    }

    static Class<?> typeClass(String type) {
        String base = erasure(type);
        switch (base) {
            case "double":
                return double.class;
            case "float":
                return float.class;
            case "long":
                return long.class;
            case "int":
                return int.class;
            case "boolean":
                return boolean.class;
            default:
                try {
                    return Class.forName(base);
                } catch (ClassNotFoundException e) {
                    return Object.class;
                }
        }
    }

    /**
     * The JSON value as the object a parameter of {@code type} holds, as Dubbo's deserialization
     * makes it: Double/Float/Long/Integer/Boolean for the number and boolean types (a float
     * through the double, as Switchman's Hessian mapping does), BigDecimal of the text, an
     * ArrayList, a HashSet or a HashMap (filled in JSON order) for the collection types, elements
     * and values untyped.
     */
    static Object typedValue(Object v, String type) {
        if (v == null) {
            return null;
        }
        switch (erasure(type)) {
            case "double":
            case "java.lang.Double":
                return ((Number) v).doubleValue();
            case "float":
            case "java.lang.Float":
                return (float) ((Number) v).doubleValue();
            case "long":
            case "java.lang.Long":
                return ((Number) v).longValue();
            case "int":
            case "java.lang.Integer":
                return ((Number) v).intValue();
            case "boolean":
            case "java.lang.Boolean":
                return (Boolean) v;
            case "java.lang.String":
                return String.valueOf(v);
            case "java.math.BigDecimal":
                return new BigDecimal(v.toString());
            case "java.util.List":
            case "java.util.ArrayList":
            case "java.util.Collection":
                return untypedDeep(v);
            case "java.util.Set":
            case "java.util.HashSet":
                return new HashSet<>((List<?>) untypedDeep(v));
            case "java.util.Map":
            case "java.util.HashMap":
                return untypedDeep(v);
            default:
                return javaValue(v);
        }
    }

    /** JSON arrays as ArrayLists and objects as HashMaps (put in JSON order), scalars untyped. */
    static Object untypedDeep(Object v) {
        if (v instanceof JSONArray) {
            JSONArray a = (JSONArray) v;
            List<Object> list = new ArrayList<>(a.size());
            for (int i = 0; i < a.size(); i++) {
                list.add(untypedDeep(a.get(i)));
            }
            return list;
        }
        if (v instanceof JSONObject) {
            Map<String, Object> map = new HashMap<>();
            for (Map.Entry<String, Object> e : ((JSONObject) v).entrySet()) {
                map.put(e.getKey(), untypedDeep(e.getValue()));
            }
            return map;
        }
        return javaValue(v);
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
