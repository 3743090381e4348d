package io.switchman.peers;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** {@code --key value} / {@code --key=value} flags; a flag given twice keeps every value. */
final class Args {
    private final Map<String, List<String>> values = new HashMap<>();

    Args(String[] argv, int from) {
        for (int i = from; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + a);
            }
            String key = a.substring(2);
            String value;
            int eq = key.indexOf('=');
            if (eq >= 0) {
                value = key.substring(eq + 1);
                key = key.substring(0, eq);
            } else {
                if (i + 1 >= argv.length) {
                    throw new IllegalArgumentException("flag --" + key + " needs a value");
                }
                value = argv[++i];
            }
            values.computeIfAbsent(key, k -> new ArrayList<>()).add(value);
        }
    }

    boolean has(String key) {
        return values.containsKey(key);
    }

    String get(String key, String dflt) {
        List<String> v = values.get(key);
        return v == null ? dflt : v.get(v.size() - 1);
    }

    String require(String key) {
        String v = get(key, null);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("flag --" + key + " is required");
        }
        return v;
    }

    Integer getInt(String key, Integer dflt) {
        String v = get(key, null);
        return v == null ? dflt : Integer.valueOf(v.trim());
    }

    List<String> all(String key) {
        List<String> v = values.get(key);
        return v == null ? new ArrayList<>() : v;
    }
}
