package io.switchman.peers;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;

import java.lang.reflect.Array;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON writer with fixed rules (dates as epoch milliseconds, byte[] as lowercase hex,
 * enums by name, other beans by toString) and a reader (fastjson2, already on Dubbo's classpath)
 * that returns plain JDK collections.
 */
final class Json {
    private Json() {}

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
        return sb.toString();
    }

    static byte[] unhex(String s) {
        if (s.length() % 2 != 0) {
            throw new IllegalArgumentException("odd hex length");
        }
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            int hi = Character.digit(s.charAt(2 * i), 16);
            int lo = Character.digit(s.charAt(2 * i + 1), 16);
            if (hi < 0 || lo < 0) {
                throw new IllegalArgumentException("bad hex at " + (2 * i));
            }
            b[i] = (byte) ((hi << 4) | lo);
        }
        return b;
    }

    /** Parses JSON text into null, Boolean, Integer/Long/BigInteger, Double, String, List, Map. */
    static Object parse(String text) {
        return plain(JSON.parse(text));
    }

    private static Object plain(Object v) {
        if (v instanceof JSONObject) {
            Map<String, Object> m = new LinkedHashMap<>();
            for (Map.Entry<String, Object> e : ((JSONObject) v).entrySet()) {
                m.put(e.getKey(), plain(e.getValue()));
            }
            return m;
        }
        if (v instanceof JSONArray) {
            List<Object> l = new ArrayList<>();
            for (Object o : (JSONArray) v) {
                l.add(plain(o));
            }
            return l;
        }
        if (v instanceof BigDecimal) {
            return ((BigDecimal) v).doubleValue();
        }
        if (v instanceof Float) {
            return ((Float) v).doubleValue();
        }
        return v;
    }

    static String write(Object v) {
        StringBuilder sb = new StringBuilder();
        write(sb, v);
        return sb.toString();
    }

    static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                string(sb, String.valueOf(d));
            } else {
                sb.append(v);
            }
        } else if (v instanceof BigDecimal) {
            sb.append(((BigDecimal) v).toString());
        } else if (v instanceof Number) {
            sb.append(v);
        } else if (v instanceof CharSequence || v instanceof Character) {
            string(sb, v.toString());
        } else if (v instanceof Date) {
            sb.append(((Date) v).getTime());
        } else if (v instanceof byte[]) {
            string(sb, hex((byte[]) v));
        } else if (v instanceof Enum) {
            string(sb, ((Enum<?>) v).name());
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                string(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else if (v.getClass().isArray()) {
            sb.append('[');
            int n = Array.getLength(v);
            for (int i = 0; i < n; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                write(sb, Array.get(v, i));
            }
            sb.append(']');
        } else if (v instanceof Throwable) {
            string(sb, v.getClass().getName() + ": " + ((Throwable) v).getMessage());
        } else if (v instanceof BigInteger) {
            sb.append(v);
        } else {
            string(sb, v.toString());
        }
    }

    static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
