// The page's scoring: the export's files fetched from this origin (?model=FOLDER/, default model/), the model run by
// onnxruntime-web in WebAssembly, the tokenization and the parity check of senti.serving (../node/scorer.mjs). An
// export with aspect heads (`senti train --aspects`) answers per aspect, as senti.serving's aspects do
// (../node/aspects.mjs).
import * as ort from "./node_modules/onnxruntime-web/dist/ort.wasm.min.mjs";
import { Tokenizer } from "./node_modules/@huggingface/tokenizers/dist/tokenizers.min.mjs";
import { Scorer } from "../node/scorer.mjs";
import { answerAspects, headAspects } from "../node/aspects.mjs";

const FORMAT = "onnx";
const folder = new URLSearchParams(location.search).get("model") || "model/";
const status = document.getElementById("status");

ort.env.wasm.numThreads = 1; // no SharedArrayBuffer, so no cross-origin isolation is needed
ort.env.wasm.wasmPaths = new URL("./node_modules/onnxruntime-web/dist/", import.meta.url).href;

async function fetchFile(name) {
  const response = await fetch(new URL(name, new URL(folder, location.href)));
  if (!response.ok) throw new Error(`${folder}${name}: HTTP ${response.status}`);
  return response;
}

async function load() {
  const meta = await (await fetchFile("export.json")).json();
  Scorer.checkMeta(meta, folder, FORMAT);
  const tokenizer = new Tokenizer(await (await fetchFile("tokenizer.json")).json(),
                                  await (await fetchFile("tokenizer_config.json")).json());
  const bytes = new Uint8Array(await (await fetchFile("model.onnx")).arrayBuffer());
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"] });
  const scorer = new Scorer(meta, tokenizer, session, FORMAT, ort);
  await scorer.checkParity(folder);
  return scorer;
}

function cell(content) {
  const td = document.createElement("td");
  td.append(content);
  return td;
}

function showAspects(answers) {
  // one row per aspect head: its answer and P(positive) among its four outputs
  const mentioned = Object.values(answers).filter((a) => a.polarity !== "not_mentioned").length;
  document.getElementById("label").textContent = `${mentioned} of ${Object.keys(answers).length} aspects mentioned`;
  document.getElementById("probabilities").replaceChildren(...Object.entries(answers).map(([name, answer]) => {
    const row = document.createElement("tr");
    row.className = answer.polarity;
    row.append(cell(name), cell(answer.polarity), cell(answer.score === null ? "-" : answer.score.toFixed(4)));
    return row;
  }));
}

function show(prediction) {
  // an answer below the export's abstention threshold keeps its label, marked for a person to check
  document.getElementById("label").textContent = prediction.unsure ? `${prediction.label} (unsure)` : prediction.label;
  document.getElementById("probabilities").replaceChildren(...Object.entries(prediction.probabilities).map(([label, p]) => {
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.width = `${Math.round(p * 200)}px`;
    const row = document.createElement("tr");
    row.append(cell(label), cell(p.toFixed(4)), cell(bar));
    return row;
  }));
}

try {
  const scorer = await load();
  window.senti = scorer; // for scripts and tests: window.senti.predict(texts)
  const scores = scorer.calibration ? `calibrated, temperature ${scorer.calibration.temperature.toFixed(3)}` : "plain softmax";
  const unsure = scorer.threshold === null ? "" : `; unsure below ${scorer.threshold.toFixed(4)}`;
  status.textContent = `model loaded (${FORMAT}, labels ${scorer.labels.join(", ")}); parity sample reproduced; ${scores}${unsure}`;
  // the heads' own names stand in for an aspect list: the page has no keywords, so it gives no evidence
  const heads = headAspects(scorer.labels)?.map((name) => ({ name, label: "", keywords: [] }));
  if (heads) status.textContent += `; ${heads.length} aspect heads`;
  const button = document.getElementById("score");
  button.disabled = false;
  button.addEventListener("click", async () => {
    const text = document.getElementById("text").value;
    if (heads) showAspects((await answerAspects(scorer, [text], heads))[0]);
    else show((await scorer.predict([text]))[0]);
  });
} catch (err) {
  status.textContent = `error: ${err.message}`;
}
