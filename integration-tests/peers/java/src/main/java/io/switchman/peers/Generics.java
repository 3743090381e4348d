package io.switchman.peers;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Generic collections of the mapping table as fields: {@code List<User>}, {@code Map<String,
 * List<Long>>}, {@code Set<String>}, arrays (of POJOs, of longs, of strings) and enum constants
 * repeated in one stream (refs). Collections are HashMap/HashSet/ArrayList with keys that
 * iterate in sorted order, so a Rust BTreeMap/BTreeSet/Vec writes the same bytes.
 */
public class Generics implements Serializable {
    private static final long serialVersionUID = 1L;

    List<User> users;
    Map<String, List<Long>> index;
    Set<String> names;
    User[] array;
    long[] longs;
    String[] strings;
    List<Color> colors;
    Color first;
    Color second;
    Map<Long, User> byId;

    public Generics() {}

    /** A user whose attributes are a HashMap (User.sample's LinkedHashMap is written typed). */
    static User user(long id) {
        User u = User.sample(id);
        u.setAttributes(new HashMap<>(u.getAttributes()));
        return u;
    }

    static Generics sample() {
        Generics g = new Generics();
        g.users = new ArrayList<>(Arrays.asList(user(1), user(2)));
        g.index = new HashMap<>();
        g.index.put("a", new ArrayList<>(Arrays.asList(1L, 2L)));
        g.index.put("b", new ArrayList<>());
        g.names = new HashSet<>(Arrays.asList("a", "b", "c"));
        g.array = new User[] {user(3)};
        g.longs = new long[] {5L, -1L};
        g.strings = new String[] {"x", "y"};
        g.colors = new ArrayList<>(Arrays.asList(Color.RED, Color.BLUE, Color.RED));
        g.first = Color.BLUE;
        g.second = Color.GREEN;
        g.byId = new HashMap<>();
        g.byId.put(4L, user(4));
        return g;
    }

    static Generics nulls() {
        return new Generics();
    }
}
