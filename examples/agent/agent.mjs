// A team's agent behind ackd's stream effect (docs/agents.md): it answers
// every question with NDJSON, one {"text"} line per word, after a status.
// ackd asks again with the same Idempotency-Key after a crash: the agent
// answers from its cache, so the message shows the same answer.
import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";

const secret = process.env.ACKD_FORWARD_SECRET ?? "";
const answers = new Map(); // Idempotency-Key → answer (keep it in your database)

createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  const sig = createHmac("sha256", secret).update(`v0:${req.headers["x-ackd-timestamp"]}:${body}`).digest("hex");
  const got = Buffer.from(req.headers["x-ackd-signature"] ?? "");
  if (secret && (got.length !== sig.length + 3 || !timingSafeEqual(got, Buffer.from("v0=" + sig)))) {
    return res.writeHead(401).end();
  }
  const key = req.headers["idempotency-key"], question = JSON.parse(body).envelope?.event?.text ?? "";
  const answer = answers.get(key) ?? `You asked: ${question}`; // your LLM call goes here
  answers.set(key, answer);
  res.writeHead(200, { "content-type": "application/x-ndjson" });
  res.write(JSON.stringify({ status: "is writing…" }) + "\n");
  for (const word of answer.split(/(?<= )/)) {
    res.write(JSON.stringify({ text: word }) + "\n");
    await new Promise((done) => setTimeout(done, 50));
  }
  res.end();
}).listen(Number(process.env.PORT ?? 8080), "127.0.0.1");
