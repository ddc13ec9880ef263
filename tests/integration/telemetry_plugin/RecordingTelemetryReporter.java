// A broker-side KIP-714 receiver for tests: the broker hands it every PushTelemetry it accepts, and
// it appends one JSON line per push to the file named by the system property
// aiokafka.telemetry.out (tests/integration/test_telemetry.py compiles it against the broker's jars).
// Each line: receive time, client instance id, terminating flag, content type, payload size, and the
// metric names the OTLP payload holds, decoded with the protobuf classes Kafka ships (shaded).

import java.io.FileWriter;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

public class RecordingTelemetryReporter implements MetricsReporter, ClientTelemetryExporterProvider {

    private final String out = System.getProperty("aiokafka.telemetry.out");

    @Override public void configure(Map<String, ?> configs) { }
    @Override public void init(List<KafkaMetric> metrics) { }
    @Override public void metricChange(KafkaMetric metric) { }
    @Override public void metricRemoval(KafkaMetric metric) { }
    @Override public void close() { }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::record;
    }

    private synchronized void record(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        ByteBuffer data = payload.data().duplicate();
        byte[] bytes = new byte[data.remaining()];
        data.get(bytes);
        List<String> names = new ArrayList<>();
        String decodeError = null;
        try {
            MetricsData parsed = MetricsData.parseFrom(bytes);
            for (ResourceMetrics resource : parsed.getResourceMetricsList()) {
                for (ScopeMetrics scope : resource.getScopeMetricsList()) {
                    for (Metric metric : scope.getMetricsList()) {
                        names.add(metric.getName());
                    }
                }
            }
        } catch (Exception e) {
            decodeError = e.toString();
        }
        StringBuilder line = new StringBuilder("{");
        line.append("\"time_ms\":").append(System.currentTimeMillis());
        line.append(",\"client_instance_id\":").append(quote(payload.clientInstanceId().toString()));
        line.append(",\"terminating\":").append(payload.isTerminating());
        line.append(",\"content_type\":").append(quote(payload.contentType()));
        line.append(",\"push_interval_ms\":").append(context.pushIntervalMs());
        line.append(",\"client_id\":").append(quote(context.authorizableRequestContext().clientId()));
        line.append(",\"size\":").append(bytes.length);
        line.append(",\"decode_error\":").append(decodeError == null ? "null" : quote(decodeError));
        line.append(",\"metrics\":[");
        for (int i = 0; i < names.size(); i++) {
            line.append(i == 0 ? "" : ",").append(quote(names.get(i)));
        }
        line.append("]}\n");
        try (FileWriter writer = new FileWriter(out, true)) {
            writer.write(line.toString());
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
