// An ordinary Bolt app, run behind ackd. Nothing in the listeners knows about
// ackd; only the receiver options matter:
//   processBeforeResponse: true        answer after the listeners finished, so a
//                                      200 means "done" and a 500 means "retry"
//   unhandledRequestTimeoutMillis      nothing waits on Slack's 3 s any more
//                                      (ackd has acked already): give listeners time
//   customPropertiesExtractor          optional: ackd's Idempotency-Key and attempt
//                                      number, readable in context
//
// BOLT_RECEIVER=express selects ExpressReceiver; the default is HTTPReceiver.
// Both serve events, commands and interactivity on /slack/events.
'use strict';
const { App, HTTPReceiver, ExpressReceiver } = require('@slack/bolt');

const receiverOptions = {
  signingSecret: process.env.SLACK_SIGNING_SECRET,
  processBeforeResponse: true,
  unhandledRequestTimeoutMillis: 20000,
  customPropertiesExtractor: (req) => ({
    idempotencyKey: req.headers['idempotency-key'],
    ackdAttempt: req.headers['x-ackd-attempt'],
  }),
};
const receiver = process.env.BOLT_RECEIVER === 'express'
  ? new ExpressReceiver(receiverOptions)
  : new HTTPReceiver(receiverOptions);

const app = new App({ token: process.env.SLACK_BOT_TOKEN, receiver });

// Events: ackd has answered Slack; this runs from ackd's outbox, at least once.
app.event('app_mention', async ({ event, client, context }) => {
  console.log(`app_mention ${context.idempotencyKey} attempt ${context.ackdAttempt}`);
  await client.chat.postMessage({ channel: event.channel, thread_ts: event.ts, text: `Hello <@${event.user}>` });
});

// A command's ack() body reaches the user through its response_url.
app.command('/deploy', async ({ command, ack }) => {
  await ack({ response_type: 'in_channel', text: `Deploying ${command.text}…` });
});

// view_submission and block_suggestion: ackd runs the first attempt inline
// and answers Slack with what the listener acked.
app.view('deploy_modal', async ({ view, ack }) => {
  const service = view.state.values.service?.name?.value ?? '';
  if (!service) {
    await ack({ response_action: 'errors', errors: { service: 'Which service?' } });
    return;
  }
  await ack();
});

app.options('service_picker', async ({ options, ack }) => {
  const all = ['api', 'web', 'worker'];
  await ack({
    options: all.filter((s) => s.startsWith(options.value))
      .map((s) => ({ text: { type: 'plain_text', text: s }, value: s })),
  });
});

(async () => {
  const port = Number(process.env.PORT || 3001);
  await app.start(port);
  console.log(`bolt app listening on 127.0.0.1:${port} (/slack/events)`);
})();
