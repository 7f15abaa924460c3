import type { SignalTypeResource } from "../signal-types/signal-type.ts";

/**
 * A shell snippet that sends one signal of this type, signed as its scheme wants. The secret is
 * a placeholder ($SECRET): the console never knows it to show (secrets are write-only).
 */
export function curlExample(type: SignalTypeResource, baseUrl: string): string {
  const body = JSON.stringify(examplePayload(type));
  const url = `${baseUrl}/signals/RUN_ID/${type.name}`;
  const lines = [`BODY='${body.replace(/'/g, `'\\''`)}'`];
  const send = (headers: string[]) =>
    [...lines, `curl -X POST '${url}' \\`, `  -H 'content-type: application/json' \\`, ...headers.map((h) => `  -H ${h} \\`), `  --data-raw "$BODY"`].join("\n");
  const hmacHex = (input: string) => `$(printf '%s' ${input} | openssl dgst -sha256 -hmac "$SECRET" -r | cut -d' ' -f1)`;
  const secret = "SECRET='…' # one of the type's secrets";
  switch (type.auth.scheme) {
    case "none":
      return send([]);
    case "standard-webhooks":
      lines.unshift(`${secret} (whsec_…)`, "ID=msg_$(date +%s%N); TS=$(date +%s)");
      lines.push(`SIG=$(printf '%s' "$ID.$TS.$BODY" | openssl dgst -sha256 -mac HMAC -macopt hexkey:$(printf '%s' "\${SECRET#whsec_}" | base64 -d | od -An -tx1 | tr -d ' \\n') -binary | base64)`);
      return send([`"webhook-id: $ID"`, `"webhook-timestamp: $TS"`, `"webhook-signature: v1,$SIG"`]);
    case "github":
      lines.unshift(secret);
      return send([`"X-Hub-Signature-256: sha256=${hmacHex(`"$BODY"`)}"`]);
    case "hmac-sha256":
      lines.unshift(secret);
      return send([`"${type.auth.header ?? "X-Signature"}: ${hmacHex(`"$BODY"`)}"`]);
    case "shopify":
      lines.unshift(secret);
      return send([`"X-Shopify-Hmac-Sha256: $(printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$SECRET" -binary | base64)"`]);
    case "stripe":
      lines.unshift(`${secret} (whsec_…, used as it is)`, "TS=$(date +%s)");
      return send([`"Stripe-Signature: t=$TS,v1=${hmacHex(`"$TS.$BODY"`)}"`]);
    case "slack":
      lines.unshift(secret, "TS=$(date +%s)");
      return send([`"X-Slack-Request-Timestamp: $TS"`, `"X-Slack-Signature: v0=${hmacHex(`"v0:$TS:$BODY"`)}"`]);
  }
}

/** A payload the type accepts, as far as a simple reading of its schema can tell. */
export function examplePayload(type: Pick<SignalTypeResource, "schema" | "responses">): unknown {
  const fromSchema = exampleOf(type.schema, 0);
  if (!type.responses || type.responses.length === 0) return fromSchema ?? {};
  const base = fromSchema && typeof fromSchema === "object" && !Array.isArray(fromSchema) ? fromSchema : {};
  return { ...base, response: type.responses[0], responder: "kim@example.com" };
}

function exampleOf(schema: unknown, depth: number): unknown {
  if (!schema || typeof schema !== "object" || depth > 4) return undefined;
  const s = schema as Record<string, unknown>;
  if ("const" in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if (s.examples && Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0];
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case "object": {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = Array.isArray(s.required) ? (s.required as string[]) : Object.keys(props);
      return Object.fromEntries(required.map((k) => [k, exampleOf(props[k], depth + 1) ?? "…"]));
    }
    case "array":
      return [];
    case "boolean":
      return true;
    case "integer":
    case "number":
      return typeof s.minimum === "number" ? s.minimum : 1;
    case "string":
      return "text";
    case "null":
      return null;
    default:
      return undefined;
  }
}
