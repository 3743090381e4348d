package io.switchman.peers;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** A plain serializable bean; the field order is part of the Hessian2 vectors. */
public class User implements Serializable {
    private static final long serialVersionUID = 1L;

    private long id;
    private String name;
    private int age;
    private double score;
    private boolean active;
    private Date created;
    private List<String> tags;
    private Map<String, Object> attributes;

    public User() {}

    public User(
            long id,
            String name,
            int age,
            double score,
            boolean active,
            Date created,
            List<String> tags,
            Map<String, Object> attributes) {
        this.id = id;
        this.name = name;
        this.age = age;
        this.score = score;
        this.active = active;
        this.created = created;
        this.tags = tags;
        this.attributes = attributes;
    }

    /**
     * The deterministic user of {@code id}: name "u"+id, age 20+id, score id*1.5, active when id
     * is even, created 1700000000000+id ms, tags ["t"+id], attributes {"n": (int) id}.
     */
    public static User sample(long id) {
        List<String> tags = new ArrayList<>();
        tags.add("t" + id);
        Map<String, Object> attributes = new LinkedHashMap<>();
        attributes.put("n", (int) id);
        return new User(
                id,
                "u" + id,
                (int) (20 + id),
                id * 1.5,
                id % 2 == 0,
                new Date(1700000000000L + id),
                tags,
                attributes);
    }

    public long getId() {
        return id;
    }

    public void setId(long id) {
        this.id = id;
    }

    public String getName() {
        return name;
    }

    public void setName(String name) {
        this.name = name;
    }

    public int getAge() {
        return age;
    }

    public void setAge(int age) {
        this.age = age;
    }

    public double getScore() {
        return score;
    }

    public void setScore(double score) {
        this.score = score;
    }

    public boolean isActive() {
        return active;
    }

    public void setActive(boolean active) {
        this.active = active;
    }

    public Date getCreated() {
        return created;
    }

    public void setCreated(Date created) {
        this.created = created;
    }

    public List<String> getTags() {
        return tags;
    }

    public void setTags(List<String> tags) {
        this.tags = tags;
    }

    public Map<String, Object> getAttributes() {
        return attributes;
    }

    public void setAttributes(Map<String, Object> attributes) {
        this.attributes = attributes;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof User)) {
            return false;
        }
        User u = (User) o;
        return id == u.id
                && age == u.age
                && Double.compare(score, u.score) == 0
                && active == u.active
                && Objects.equals(name, u.name)
                && Objects.equals(created, u.created)
                && Objects.equals(tags, u.tags)
                && Objects.equals(attributes, u.attributes);
    }

    @Override
    public int hashCode() {
        return Objects.hash(id, name, age, score, active, created, tags, attributes);
    }

    @Override
    public String toString() {
        return "User{id=" + id + ", name=" + name + ", age=" + age + ", score=" + score
                + ", active=" + active + ", created=" + (created == null ? null : created.getTime())
                + ", tags=" + tags + ", attributes=" + attributes + "}";
    }
}
