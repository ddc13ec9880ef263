// A broker-side OAUTHBEARER validator for tests/integration/test_msk_iam.py: it accepts the tokens of
// aws-msk-iam-sasl-signer-python (a base64url presigned URL for kafka-cluster:Connect, SigV4-signed)
// when their action, expiry and signature check out against the static test credentials given as
// JAAS options of the listener's OAuthBearerLoginModule (awsAccessKeyId, awsSecretAccessKey,
// awsRegion). Tests only: it stands in for Amazon MSK's IAM check, which nobody can run offline.
import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;

import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerExtensionsValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;

public class MskIamTestValidator implements AuthenticateCallbackHandler {
    private static final DateTimeFormatter AMZ_DATE = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'");
    private static final String SERVICE = "kafka-cluster";
    private String accessKeyId;
    private String secretAccessKey;
    private String region;

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
        Map<String, ?> options = entries.get(0).getOptions();
        accessKeyId = (String) options.get("awsAccessKeyId");
        secretAccessKey = (String) options.get("awsSecretAccessKey");
        region = (String) options.get("awsRegion");
        if (accessKeyId == null || secretAccessKey == null || region == null)
            throw new IllegalArgumentException("JAAS options awsAccessKeyId, awsSecretAccessKey and awsRegion are needed");
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (callback instanceof OAuthBearerValidatorCallback) {
                OAuthBearerValidatorCallback validation = (OAuthBearerValidatorCallback) callback;
                try {
                    validation.token(validate(validation.tokenValue()));
                } catch (RuntimeException e) {
                    System.err.println("MskIamTestValidator refused a token: " + e.getMessage());
                    validation.error("invalid_token", null, null);
                }
            } else if (callback instanceof OAuthBearerExtensionsValidatorCallback) {
                OAuthBearerExtensionsValidatorCallback extensions = (OAuthBearerExtensionsValidatorCallback) callback;
                extensions.inputExtensions().map().keySet().forEach(extensions::valid);
            } else {
                throw new UnsupportedCallbackException(callback);
            }
        }
    }

    private OAuthBearerToken validate(String token) {
        String url = new String(Base64.getUrlDecoder().decode(token), StandardCharsets.UTF_8);
        URI uri = URI.create(url);
        String host = "kafka." + region + ".amazonaws.com";
        if (!"https".equals(uri.getScheme()) || !host.equals(uri.getHost()))
            throw new IllegalArgumentException("not a presigned URL for " + host + ": " + uri.getHost());
        Map<String, String> params = new TreeMap<>();
        for (String pair : uri.getRawQuery().split("&")) {
            int eq = pair.indexOf('=');
            params.put(decode(pair.substring(0, eq)), decode(pair.substring(eq + 1)));
        }
        if (!"kafka-cluster:Connect".equals(params.get("Action")))
            throw new IllegalArgumentException("Action is " + params.get("Action") + ", not kafka-cluster:Connect");
        if (!"AWS4-HMAC-SHA256".equals(params.get("X-Amz-Algorithm")) || !"host".equals(params.get("X-Amz-SignedHeaders")))
            throw new IllegalArgumentException("not an AWS4-HMAC-SHA256 presigned URL signing host only");
        String date = params.get("X-Amz-Date");
        String[] credential = params.get("X-Amz-Credential").split("/");
        if (!accessKeyId.equals(credential[0]) || !region.equals(credential[2]) || !SERVICE.equals(credential[3]))
            throw new IllegalArgumentException("credential scope " + params.get("X-Amz-Credential") + " is not ours");
        long signedAtMs = LocalDateTime.parse(date, AMZ_DATE).toInstant(ZoneOffset.UTC).toEpochMilli();
        long expiresAtMs = signedAtMs + Long.parseLong(params.get("X-Amz-Expires")) * 1000;
        long now = System.currentTimeMillis();
        if (expiresAtMs <= now)
            throw new IllegalArgumentException("expired at " + expiresAtMs + " (now " + now + ")");
        if (!sign(params, date, credential[1]).equals(params.get("X-Amz-Signature")))
            throw new IllegalArgumentException("signature does not match");
        return new Token(token, accessKeyId, signedAtMs, expiresAtMs);
    }

    private String sign(Map<String, String> params, String date, String day) {
        StringBuilder query = new StringBuilder();
        for (Map.Entry<String, String> entry : params.entrySet()) {
            if (entry.getKey().equals("X-Amz-Signature") || entry.getKey().equals("User-Agent")) continue;
            if (query.length() > 0) query.append('&');
            query.append(encode(entry.getKey())).append('=').append(encode(entry.getValue()));
        }
        String canonical = String.join("\n", "GET", "/", query.toString(),
            "host:kafka." + region + ".amazonaws.com\n", "host", hex(sha256("")));
        String scope = day + "/" + region + "/" + SERVICE + "/aws4_request";
        String toSign = String.join("\n", "AWS4-HMAC-SHA256", date, scope, hex(sha256(canonical)));
        byte[] key = ("AWS4" + secretAccessKey).getBytes(StandardCharsets.UTF_8);
        for (String part : scope.split("/")) key = hmac(key, part);
        return hex(hmac(key, toSign));
    }

    private static String decode(String s) {
        return URLDecoder.decode(s, StandardCharsets.UTF_8);
    }

    private static String encode(String s) {  // RFC 3986 unreserved characters stay, as SigV4 wants
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20").replace("*", "%2A").replace("%7E", "~");
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static byte[] hmac(byte[] key, String data) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            return mac.doFinal(data.getBytes(StandardCharsets.UTF_8));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) out.append(String.format("%02x", b));
        return out.toString();
    }

    @Override
    public void close() {
    }

    private static final class Token implements OAuthBearerToken {
        private final String value;
        private final String principal;
        private final long startMs;
        private final long lifetimeMs;

        Token(String value, String principal, long startMs, long lifetimeMs) {
            this.value = value;
            this.principal = principal;
            this.startMs = startMs;
            this.lifetimeMs = lifetimeMs;
        }

        @Override public String value() { return value; }
        @Override public Set<String> scope() { return Set.of(); }
        @Override public long lifetimeMs() { return lifetimeMs; }
        @Override public String principalName() { return principal; }
        @Override public Long startTimeMs() { return startMs; }
    }
}
