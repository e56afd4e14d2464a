// The HTTP handler a service would copy: node server.mjs EXPORT_DIR [PORT] -> POST /v1/predict {"texts": [...]}
import { createServer } from "node:http";
import { Senti } from "./senti.mjs";

const [folder, port = "8000"] = process.argv.slice(2);
const model = await Senti.load(folder, { format: process.env.SENTI_FORMAT || "onnx-int8-static" });
const reply = (res, code, body) => res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(body));

createServer(async (req, res) => {
  if (req.method !== "POST" || req.url !== "/v1/predict") return reply(res, 404, { error: "POST /v1/predict" });
  let body = "";
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 1 << 20) return reply(res, 413, { error: "body over 1 MB" });
  }
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
}).listen(Number(port), "127.0.0.1", () => console.log(`listening on 127.0.0.1:${port}`));
