// A stand-in for Slack's Web API, to try app.js without Slack (README.md):
// every method answers {"ok": true} (chat.postMessage with a channel and a
// fresh ts, auth.test with a fixed bot), and each call is printed, one line:
//
//   chat.postMessage {"channel":"C0LAN2Q65","thread_ts":"…","text":"Hello <@U061F7AUR>"}
//
// PORT (default 3002) on 127.0.0.1; point the app at it with
// SLACK_API_URL=http://127.0.0.1:3002/api/.
'use strict';
const http = require('node:http');

const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const method = (req.url ?? '').replace(/^\/api\//, '').split('?')[0];
    let args = {};
    try {
      args = (req.headers['content-type'] ?? '').includes('json')
        ? JSON.parse(body || '{}')
        : Object.fromEntries(new URLSearchParams(body));
    } catch {
      args = { unparsed: body };
    }
    console.log(`${method} ${JSON.stringify(args)}`);
    const answer = { ok: true };
    if (method === 'chat.postMessage') {
      answer.channel = args.channel;
      answer.ts = (Date.now() / 1000).toFixed(6);
    } else if (method === 'auth.test') {
      Object.assign(answer, { user_id: 'U0OFFLINE', bot_id: 'B0OFFLINE', team_id: 'T0OFFLINE' });
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(answer));
  });
});

const port = Number(process.env.PORT || 3002);
server.listen({ port, host: '127.0.0.1' }, () => {
  console.log(`fake Slack Web API on http://127.0.0.1:${port}/api/`);
});
