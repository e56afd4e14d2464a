// The HTTP handler a service would copy: node server.mjs EXPORT_DIR [PORT] -> POST /v1/predict {"texts": [...]}
import { createServer } from "node:http";
import { Senti } from "./senti.mjs";

const MAX_BODY_BYTES = 1 << 20; // bytes, as senti serve counts them (a UTF-16 count let 3 MB of Chinese through)
const [folder, port = "8000"] = process.argv.slice(2);
const model = await Senti.load(folder, { format: process.env.SENTI_FORMAT || "onnx-int8-static" });
const reply = (res, code, body) => res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));

// The whole body as bytes, decoded once: a character split between two reads stays one character. null when the
// client went away mid-body (nothing to answer), "too large" past the limit.
async function readBody(req) {
  const chunks = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return "too large";
      chunks.push(chunk);
    }
  } catch {
    return null; // an aborted upload: one client's loss, never the server's
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function handle(req, res) {
  if (req.method !== "POST" || req.url !== "/v1/predict") return reply(res, 404, { error: "POST /v1/predict" });
  const body = await readBody(req);
  if (body === null) return undefined;
  if (body === "too large") return reply(res, 413, { error: "body over 1 MB" });
  let texts;
  try {
    texts = JSON.parse(body).texts;
  } catch {
    return reply(res, 422, { error: "body is not JSON" });
  }
  if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string") || texts.length > 256) {
    return reply(res, 422, { error: "expected {\"texts\": [up to 256 strings]}" });
  }
  return reply(res, 200, { predictions: await model.predict(texts) });
}

createServer((req, res) => {
  handle(req, res).catch((err) => {
    console.error(`scoring failed: ${err?.message ?? err}`);
    if (!res.headersSent && !res.destroyed) reply(res, 500, { error: "scoring failed" });
  });
}).listen(Number(port), "127.0.0.1", () => console.log(`listening on 127.0.0.1:${port}`));
