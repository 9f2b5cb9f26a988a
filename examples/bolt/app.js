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
//
// SLACK_BOT_TOKEN set: the app's real installation (Bolt checks the token
// with auth.test at start). Unset, to try it without Slack (README.md): a
// fixed installation through authorize(), so Bolt asks Slack nothing at
// start, and the Web API calls go to SLACK_API_URL (fake-slack.js), which is
// then required.
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

const token = process.env.SLACK_BOT_TOKEN;
const clientOptions = process.env.SLACK_API_URL ? { slackApiUrl: process.env.SLACK_API_URL } : {};
if (!token && !process.env.SLACK_API_URL) {
  console.error('set SLACK_BOT_TOKEN (a real installation), or SLACK_API_URL (a stand-in Web API such as fake-slack.js) to try it without Slack');
  process.exit(2);
}
const app = new App(token
  ? { token, receiver, clientOptions }
  : {
    receiver,
    clientOptions,
    authorize: async () => ({ botToken: 'xoxb-offline', botId: 'B0OFFLINE', botUserId: 'U0OFFLINE' }),
  });

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
  // Loopback only: ackd is the app's only client.
  await app.start({ port, host: '127.0.0.1' });
  console.log(`bolt app listening on 127.0.0.1:${port} (/slack/events)${token ? '' : `, Web API at ${process.env.SLACK_API_URL}`}`);
})();
