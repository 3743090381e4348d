package io.switchman.peers.oracle;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import com.alibaba.fastjson2.JSONWriter;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.dubbo.common.Version;

/**
 * The differential oracle: runs Apache Dubbo's own cluster classes (load balancers, state
 * routers, configurators, service-key matching) on the cases of a JSON file and writes Dubbo's
 * answers as JSON, for {@code integration-tests/tests/oracle.rs} to compare with Switchman's.
 *
 * <pre>
 *   oracle [--cases FILE|-] [--out FILE|-] [--verbose]
 * </pre>
 *
 * Input {@code {"cases":[{"id","component",...}]}}; output {@code {"dubbo_version",
 * "results":[{"id", ...answer}|{"id","error"}]}}, one result per case in input order. The
 * components and their fields are described in the peers README ("oracle").
 */
public final class Oracle {
    private Oracle() {}

    /** {@code argv[0]} is "oracle". Returns the process exit code. */
    public static int run(String[] argv) throws IOException {
        String cases = "-";
        String out = "-";
        boolean verbose = false;
        for (int i = 1; i < argv.length; i++) {
            switch (argv[i]) {
                case "--cases":
                    cases = value(argv, ++i, "--cases");
                    break;
                case "--out":
                    out = value(argv, ++i, "--out");
                    break;
                case "--verbose":
                    verbose = true;
                    break;
                default:
                    throw new IllegalArgumentException("oracle: unexpected argument " + argv[i]);
            }
        }
        // Dubbo logs every rule it rejects and every range it cannot evaluate (at error level):
        // expected here, thousands of times. Before the first Dubbo class loads a logger.
        if (!verbose) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "off");
        }
        String text = cases.equals("-")
                ? new String(readAll(System.in), StandardCharsets.UTF_8)
                : Files.readString(Path.of(cases), StandardCharsets.UTF_8);
        JSONObject input = JSON.parseObject(text);
        JSONArray list = input.getJSONArray("cases");
        JSONArray results = new JSONArray();
        long started = System.nanoTime();
        for (int i = 0; i < list.size(); i++) {
            JSONObject c = list.getJSONObject(i);
            results.add(one(c));
        }
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("dubbo_version", Version.getVersion());
        doc.put("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
        doc.put("results", results);
        byte[] bytes = JSON.toJSONString(doc, JSONWriter.Feature.WriteMapNullValue)
                .getBytes(StandardCharsets.UTF_8);
        if (out.equals("-")) {
            OutputStream o = new FileOutputStream(FileDescriptor.out);
            o.write(bytes);
            o.write('\n');
            o.flush();
        } else {
            Files.write(Path.of(out), bytes);
        }
        return 0;
    }

    private static String value(String[] argv, int i, String flag) {
        if (i >= argv.length) {
            throw new IllegalArgumentException("oracle: " + flag + " needs a value");
        }
        return argv[i];
    }

    private static byte[] readAll(InputStream in) throws IOException {
        return in.readAllBytes();
    }

    /** One case: its answer, or {@code {"error": "..."}} when Dubbo threw. */
    static JSONObject one(JSONObject c) {
        long started = System.nanoTime();
        JSONObject r;
        try {
            String component = c.getString("component");
            switch (component) {
                case "warmup":
                    r = Balancers.warmup(c);
                    break;
                case "loadbalance":
                    r = Balancers.loadBalance(c);
                    break;
                case "router":
                    r = Routers.route(c);
                    break;
                case "configurator":
                    r = Configurators.configure(c);
                    break;
                case "servicekey":
                    r = ServiceKeys.match(c);
                    break;
                default:
                    throw new IllegalArgumentException("unknown component " + component);
            }
        } catch (Throwable t) {
            r = new JSONObject();
            r.put("error", t.getClass().getName() + ": " + t.getMessage());
        }
        JSONObject withId = new JSONObject();
        withId.put("id", c.getString("id"));
        withId.putAll(r);
        withId.put("elapsed_us", (System.nanoTime() - started) / 1000);
        return withId;
    }
}
