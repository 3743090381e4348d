package io.switchman.peers;

import com.alibaba.com.caucho.hessian.io.Hessian2Output;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.common.Version;
import org.apache.dubbo.common.serialize.ObjectInput;
import org.apache.dubbo.common.serialize.ObjectOutput;
import org.apache.dubbo.common.serialize.Serialization;
import org.apache.dubbo.common.utils.SerializeSecurityConfigurator;
import org.apache.dubbo.common.utils.SerializeSecurityManager;
import org.apache.dubbo.rpc.model.FrameworkModel;
import org.apache.dubbo.rpc.model.ModuleModel;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * Hessian2 test vectors written and read by Dubbo's own {@code hessian2} serialization: the
 * {@link Serialization} extension "hessian2" of the default {@link FrameworkModel}, which creates
 * {@code Hessian2ObjectOutput}/{@code Hessian2ObjectInput} over hessian-lite with the framework's
 * {@code Hessian2FactoryManager} serializer factory, exactly as the dubbo protocol's codec does.
 * Every vector is one {@code writeObject} on a fresh output, then {@code flushBuffer}.
 */
final class Vectors {
    private Vectors() {}

    static int run(String[] argv) throws Exception {
        String mode = argv.length > 1 ? argv[1] : "";
        switch (mode) {
            case "encode":
                Main.STDOUT.println(encodeAll());
                return 0;
            case "decode":
                Main.STDOUT.println(decodeAll(readAll(System.in)));
                return 0;
            case "bench":
                return CodecBench.run(argv);
            default:
                throw new IllegalArgumentException("vectors needs encode, decode or bench");
        }
    }

    // ----- the values ------------------------------------------------------------------------

    static User user(long id) {
        return User.sample(id);
    }

    static String repeat(char c, int n) {
        char[] a = new char[n];
        Arrays.fill(a, c);
        return new String(a);
    }

    /** Every vector by name, in output order. Each call builds fresh values. */
    static Map<String, Object> values() {
        Map<String, Object> v = new LinkedHashMap<>();
        v.put("null", null);
        v.put("bool_true", Boolean.TRUE);
        v.put("bool_false", Boolean.FALSE);

        v.put("int_0", 0);
        v.put("int_m16", -16);
        v.put("int_47", 47);
        v.put("int_48", 48);
        v.put("int_m2048", -2048);
        v.put("int_2047", 2047);
        v.put("int_m262144", -262144);
        v.put("int_262143", 262143);
        v.put("int_262144", 262144);
        v.put("int_max", Integer.MAX_VALUE);
        v.put("int_min", Integer.MIN_VALUE);

        v.put("long_0", 0L);
        v.put("long_m8", -8L);
        v.put("long_15", 15L);
        v.put("long_16", 16L);
        v.put("long_m2048", -2048L);
        v.put("long_2047", 2047L);
        v.put("long_m262144", -262144L);
        v.put("long_262143", 262143L);
        v.put("long_int32", 2147483647L);
        v.put("long_2p31", 2147483648L);
        v.put("long_max", Long.MAX_VALUE);
        v.put("long_min", Long.MIN_VALUE);

        v.put("double_0", 0.0);
        v.put("double_1", 1.0);
        v.put("double_m128", -128.0);
        v.put("double_127", 127.0);
        v.put("double_m32768", -32768.0);
        v.put("double_32767", 32767.0);
        v.put("double_12_25", 12.25);
        v.put("double_pi", 3.141592653589793);
        v.put("double_0_001", 0.001);
        v.put("double_1e300", 1e300);

        v.put("string_empty", "");
        v.put("string_hello", "hello");
        v.put("string_31", repeat('a', 31));
        v.put("string_32", repeat('a', 32));
        v.put("string_1023", repeat('b', 1023));
        v.put("string_1024", repeat('b', 1024));
        v.put("string_70000", repeat('c', 70000));
        v.put("string_unicode", "h\u00e9llo w\u00f6rld \u4e2d\u6587");
        v.put("string_emoji", "\ud83d\ude00 x \ud834\udd1e");

        v.put("binary_empty", new byte[0]);
        v.put("binary_3", new byte[] {1, 2, 3});
        byte[] big = new byte[20000];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) (i % 251);
        }
        v.put("binary_20000", big);

        v.put("date_ms", new Date(1700000000123L));
        v.put("date_minute", new Date(1700000040000L));

        List<Object> untyped = new ArrayList<>();
        untyped.add(1);
        untyped.add("a");
        untyped.add(true);
        v.put("list_untyped", untyped);
        v.put("list_empty", new ArrayList<>());
        v.put("list_int_array", new int[] {1, 2, 3});
        v.put("list_string_array", new String[] {"a", "b"});
        List<Integer> twenty = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            twenty.add(i);
        }
        v.put("list_20", twenty);
        List<Object> inner1 = new ArrayList<>(Arrays.asList(1, 2));
        List<Object> inner2 = new ArrayList<>(Collections.singletonList("x"));
        List<Object> nested = new ArrayList<>();
        nested.add(inner1);
        nested.add(inner2);
        v.put("list_nested", nested);
        v.put("list_linked", new LinkedList<>(Arrays.asList("p", "q")));

        Map<String, Object> m1 = new LinkedHashMap<>();
        m1.put("a", 1);
        m1.put("b", "x");
        v.put("map_untyped", m1);
        v.put("map_empty", new HashMap<>());
        Map<Integer, String> m2 = new LinkedHashMap<>();
        m2.put(1, "one");
        m2.put(2, "two");
        v.put("map_int_keys", m2);
        Map<String, String> tm = new TreeMap<>();
        tm.put("k", "v");
        v.put("map_treemap", tm);

        List<String> tags = new ArrayList<>(Arrays.asList("a", "b"));
        Map<String, Object> attrs = new LinkedHashMap<>();
        attrs.put("level", 3);
        attrs.put("vip", true);
        v.put("user", new User(7, "Ann", 33, 4.5, true, new Date(1700000000123L), tags, attrs));
        List<User> users = new ArrayList<>();
        users.add(user(1));
        users.add(user(2));
        v.put("user_list", users);
        List<String> l = new ArrayList<>(Collections.singletonList("r"));
        List<Object> twice = new ArrayList<>();
        twice.add(l);
        twice.add(l);
        v.put("same_list_twice", twice);

        v.put("enum_red", Color.RED);
        v.put("big_decimal", new BigDecimal("12345.6789"));
        v.put("big_integer", new BigInteger("123456789012345678901234567890"));

        v.put("exception_demo", new DemoException("boom"));
        v.put("exception_cause", new RuntimeException("outer", new IllegalStateException("inner")));

        // ----- one vector per row of hessian/README.md's mapping table not covered above ------
        v.put("byte_m5", (byte) -5);
        v.put("short_1000", (short) 1000);
        v.put("float_1_1", 1.1f);
        v.put("char_z", 'z');
        v.put("prims", Prims.sample());
        v.put("prims_nulls", Prims.nulls());
        v.put("empty", new Empty());
        v.put("enum_list", new ArrayList<>(Arrays.asList(Color.RED, Color.GREEN, Color.RED)));
        Map<String, Object> variant = new HashMap<>();
        variant.put("Circle", 2.5);
        v.put("map_variant", variant);
        v.put("set_one", new HashSet<>(Collections.singletonList("s")));
        v.put("set_abc", new HashSet<>(Arrays.asList("a", "b", "c")));
        v.put("derived", Derived.sample());
        v.put("generics", Generics.sample());
        v.put("generics_nulls", Generics.nulls());
        v.put("node_chain", new Node("a", new Node("b", null)));
        v.put("list_abc", new ArrayList<>(Arrays.asList("a", "b", "c")));
        // Values of every form before a repeated enum constant: the constant's ref number counts
        // exactly the values Java numbers (lists, maps, objects; not dates, binaries, strings).
        v.put("refs_after_forms", new ArrayList<>(Arrays.asList(
                new BigDecimal("1.5"),
                new HashSet<>(Collections.singletonList("s")),
                new byte[] {7},
                new Date(1700000000123L),
                Color.BLUE,
                Color.BLUE)));

        // ----- graphs an owned Rust value cannot be: Java -> Rust only ---------------------------
        Node self = new Node("self", null);
        self.next = self;
        v.put("node_self", self);
        Node ringA = new Node("a", null);
        ringA.next = new Node("b", ringA);
        v.put("node_pair", ringA);
        List<Object> listSelf = new ArrayList<>();
        listSelf.add(listSelf);
        v.put("list_self", listSelf);
        User shared = Generics.user(5);
        v.put("shared_user", new ArrayList<>(Arrays.asList(shared, shared)));
        // 48 levels of [x, x]: 2^48 leaves by refs, in a few hundred bytes.
        Object dag = new ArrayList<>(Collections.singletonList("leaf"));
        for (int i = 0; i < 48; i++) {
            dag = new ArrayList<>(Arrays.asList(dag, dag));
        }
        v.put("refs_exponential", dag);
        return v;
    }

    // ----- Dubbo's hessian2 serialization ----------------------------------------------------

    private static Serialization serialization;
    private static URL url;

    private static synchronized Serialization hessian2() {
        if (serialization == null) {
            FrameworkModel framework = FrameworkModel.defaultModel();
            ModuleModel module = framework.defaultApplication().getDefaultModule();
            // What a provider of DemoService does before it serves: trust the classes its
            // interface reaches (User). Color and DemoException are not reachable from the
            // interface, so the package is allowed explicitly as well.
            SerializeSecurityConfigurator configurator =
                    module.getBeanFactory().getBean(SerializeSecurityConfigurator.class);
            if (configurator != null) {
                configurator.registerInterface(DemoService.class);
            }
            framework.getBeanFactory()
                    .getOrRegisterBean(SerializeSecurityManager.class)
                    .addToAllowed("io.switchman.peers.");
            serialization = framework.getExtensionLoader(Serialization.class).getExtension("hessian2");
            url = URL.valueOf("dubbo://127.0.0.1:20880/" + DemoService.class.getName())
                    .setScopeModel(module);
        }
        return serialization;
    }

    static byte[] encode(Object value) throws IOException {
        ByteArrayOutputStream bos = new ByteArrayOutputStream();
        ObjectOutput out = hessian2().serialize(url, bos);
        out.writeObject(value);
        out.flushBuffer();
        return bos.toByteArray();
    }

    static Object decode(byte[] bytes) throws IOException, ClassNotFoundException {
        ObjectInput in = hessian2().deserialize(url, new ByteArrayInputStream(bytes));
        return in.readObject();
    }

    // ----- encode / decode -------------------------------------------------------------------

    static String encodeAll() throws IOException {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"dubbo_version\":");
        Json.string(sb, Version.getVersion());
        sb.append(",\"hessian_lite_version\":");
        Json.string(sb, String.valueOf(Hessian2Output.class.getPackage().getImplementationVersion()));
        sb.append(",\"vectors\":[");
        boolean first = true;
        for (Map.Entry<String, Object> e : values().entrySet()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append("{\"name\":");
            Json.string(sb, e.getKey());
            sb.append(",\"hex\":");
            Json.string(sb, Json.hex(encode(e.getValue())));
            sb.append('}');
        }
        sb.append("]}");
        return sb.toString();
    }

    static String decodeAll(String input) {
        Object parsed = Json.parse(input);
        if (!(parsed instanceof Map) || !(((Map<?, ?>) parsed).get("vectors") instanceof List)) {
            throw new IllegalArgumentException("decode input must be {\"vectors\":[{\"name\":..,\"hex\":..}]}");
        }
        Map<String, Object> expected = values();
        StringBuilder sb = new StringBuilder("{\"vectors\":[");
        boolean first = true;
        for (Object o : (List<?>) ((Map<?, ?>) parsed).get("vectors")) {
            Map<?, ?> entry = (Map<?, ?>) o;
            String name = String.valueOf(entry.get("name"));
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append("{\"name\":");
            Json.string(sb, name);
            try {
                Object value = decode(Json.unhex(String.valueOf(entry.get("hex"))));
                sb.append(",\"class\":");
                Json.write(sb, value == null ? null : value.getClass().getName());
                sb.append(",\"equal\":");
                sb.append(expected.containsKey(name) && deepEquals(expected.get(name), value));
                sb.append(",\"reencoded_hex\":");
                Json.string(sb, Json.hex(encode(value)));
            } catch (Throwable t) {
                sb.append(",\"class\":null,\"equal\":false,\"error\":");
                Json.string(sb, t.getClass().getName() + ": " + t.getMessage());
            }
            sb.append('}');
        }
        sb.append("]}");
        return sb.toString();
    }

    /**
     * Deep equality: arrays element by element (Arrays.deepEquals), lists and maps by content,
     * exceptions by class, message and the cause's class and message, BigDecimal by compareTo.
     */
    static boolean deepEquals(Object a, Object b) {
        return deepEquals(a, b, new java.util.IdentityHashMap<>());
    }

    /**
     * {@link #deepEquals(Object, Object)} over object graphs: a pair of containers (or peer
     * objects) already compared, or being compared, counts as equal, so a cycle ends and a
     * shared sub-graph (a list holding the same list twice, 48 levels deep) is compared once.
     */
    private static boolean deepEquals(Object a, Object b, java.util.IdentityHashMap<Object, Object> seen) {
        if (a == b) {
            return true;
        }
        if (a == null || b == null) {
            return false;
        }
        boolean graph = a instanceof List || a instanceof Map || isPlainPeerClass(a.getClass());
        if (graph) {
            if (seen.get(a) == b) {
                return true;
            }
            seen.put(a, b);
        }
        if (a.getClass().isArray() || b.getClass().isArray()) {
            return Arrays.deepEquals(new Object[] {a}, new Object[] {b});
        }
        if (a instanceof Throwable && b instanceof Throwable) {
            Throwable x = (Throwable) a;
            Throwable y = (Throwable) b;
            if (x.getClass() != y.getClass() || !Objects.equals(x.getMessage(), y.getMessage())) {
                return false;
            }
            Throwable cx = x.getCause() == x ? null : x.getCause();
            Throwable cy = y.getCause() == y ? null : y.getCause();
            if (cx == null || cy == null) {
                return cx == null && cy == null;
            }
            return cx.getClass() == cy.getClass() && Objects.equals(cx.getMessage(), cy.getMessage());
        }
        if (a instanceof BigDecimal && b instanceof BigDecimal) {
            return ((BigDecimal) a).compareTo((BigDecimal) b) == 0;
        }
        if (a instanceof List && b instanceof List) {
            List<?> x = (List<?>) a;
            List<?> y = (List<?>) b;
            if (x.size() != y.size()) {
                return false;
            }
            Iterator<?> i = x.iterator();
            Iterator<?> j = y.iterator();
            while (i.hasNext()) {
                if (!deepEquals(i.next(), j.next(), seen)) {
                    return false;
                }
            }
            return true;
        }
        if (a instanceof Map && b instanceof Map) {
            Map<?, ?> x = (Map<?, ?>) a;
            Map<?, ?> y = (Map<?, ?>) b;
            if (x.size() != y.size()) {
                return false;
            }
            for (Map.Entry<?, ?> e : x.entrySet()) {
                if (!y.containsKey(e.getKey()) || !deepEquals(e.getValue(), y.get(e.getKey()), seen)) {
                    return false;
                }
            }
            return true;
        }
        if (a.getClass() == b.getClass() && isPlainPeerClass(a.getClass())) {
            return fieldsEqual(a, b, seen);
        }
        // Hessian has no byte, short, float or char on the wire: a Byte comes back an Integer,
        // a Float a Double, a Character a one-character String. Equal by value.
        if (a instanceof Float) {
            return b instanceof Number && ((Number) a).floatValue() == ((Number) b).floatValue();
        }
        if (a instanceof Byte || a instanceof Short) {
            return b instanceof Number && ((Number) a).longValue() == ((Number) b).longValue();
        }
        if (a instanceof Character && b instanceof String) {
            return a.toString().equals(b);
        }
        return a.equals(b);
    }

    /** A class of this package without its own equals (Prims, Derived, Generics, Node, ...). */
    private static boolean isPlainPeerClass(Class<?> c) {
        if (!c.getName().startsWith("io.switchman.peers.") || c.isEnum()) {
            return false;
        }
        try {
            return c.getMethod("equals", Object.class).getDeclaringClass() == Object.class;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    /** Every instance field, the superclasses' too, by {@link #deepEquals}. */
    private static boolean fieldsEqual(Object a, Object b, java.util.IdentityHashMap<Object, Object> seen) {
        for (Class<?> c = a.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers())) {
                    continue;
                }
                f.setAccessible(true);
                try {
                    if (!deepEquals(f.get(a), f.get(b), seen)) {
                        return false;
                    }
                } catch (IllegalAccessException e) {
                    return false;
                }
            }
        }
        return true;
    }

    private static String readAll(InputStream in) throws IOException {
        return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
}
