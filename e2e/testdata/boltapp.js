// The Bolt app the e2e test puts behind ackd: the real, unmodified
// @slack/bolt (examples/bolt/node_modules, found through NODE_PATH) with
// listeners that record what they saw, one JSON line each, to $RECORD.
//
//   BOLT_RECEIVER  "http" (HTTPReceiver) or "express" (ExpressReceiver)
//   PORT           where to listen (path /slack/events, Bolt's default)
//   SLACK_SIGNING_SECRET, RECORD
'use strict';
const fs = require('node:fs');
const { App, HTTPReceiver, ExpressReceiver } = require('@slack/bolt');

const receiverOptions = {
  signingSecret: process.env.SLACK_SIGNING_SECRET,
  processBeforeResponse: true,
  unhandledRequestTimeoutMillis: 20000,
  customPropertiesExtractor: (req) => ({
    idempotencyKey: req.headers['idempotency-key'],
    ackdAttempt: req.headers['x-ackd-attempt'],
    slackTimestamp: req.headers['x-slack-request-timestamp'],
    retryHeader: req.headers['x-slack-retry-num'] ?? req.headers['x-slack-retry-reason'] ?? null,
  }),
};
const receiver = process.env.BOLT_RECEIVER === 'express'
  ? new ExpressReceiver(receiverOptions)
  : new HTTPReceiver(receiverOptions);

const app = new App({
  receiver,
  // No Slack to ask: a fixed installation.
  authorize: async () => ({ botToken: 'xoxb-e2e', botId: 'B0E2E', botUserId: 'U0E2EBOT' }),
});

function record(kind, id, context, extra) {
  const line = {
    kind, id, receiver: process.env.BOLT_RECEIVER,
    key: context.idempotencyKey ?? null,
    attempt: context.ackdAttempt ?? null,
    ts: context.slackTimestamp ?? null,
    retryNum: context.retryNum ?? null,
    retryReason: context.retryReason ?? null,
    retryHeader: context.retryHeader ?? null,
    at: Date.now(),
    ...extra,
  };
  fs.appendFileSync(process.env.RECORD, JSON.stringify(line) + '\n');
}

const hanging = new Set();

app.event('app_mention', async ({ event, body, context }) => {
  if (event.text === 'hang' && !hanging.has(body.event_id)) {
    hanging.add(body.event_id);
    record('hang', body.event_id, context);
    await new Promise(() => {}); // never returns: ackd is killed meanwhile
  }
  record('event', body.event_id, context, { text: event.text });
  if (event.text === 'throw') {
    throw new Error('listener failed on purpose');
  }
});

app.command('/text', async ({ command, ack, context }) => {
  await ack(`text for ${command.text}`);
  record('command', command.trigger_id, context);
});

app.command('/blocks', async ({ command, ack, context }) => {
  await ack({
    response_type: 'in_channel',
    blocks: [{ type: 'section', text: { type: 'mrkdwn', text: `blocks for ${command.text}` } }],
  });
  record('command', command.trigger_id, context);
});

app.view('form', async ({ ack, view, context }) => {
  await ack({ response_action: 'errors', errors: { service: `no service ${view.id}` } });
  record('view', view.id, context);
});

app.options('pick', async ({ options, ack, context }) => {
  await ack({ options: [{ text: { type: 'plain_text', text: `opt-${options.value}` }, value: options.value }] });
  record('options', options.value, context);
});

(async () => {
  await app.start(Number(process.env.PORT));
  console.log('ready');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
