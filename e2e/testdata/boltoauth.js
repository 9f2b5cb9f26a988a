// A Bolt app that does its own OAuth (its built-in installer at
// /slack/install and /slack/oauth_redirect), for the passthrough e2e test:
// the real, unmodified @slack/bolt (examples/bolt/node_modules, through
// NODE_PATH), its Web API client pointed at the fake Slack.
//
//   PORT, SLACK_SIGNING_SECRET, SLACK_CLIENT_ID, SLACK_CLIENT_SECRET
//   SLACK_API_URL   the fake's Web API base (with its trailing slash)
//   RECORD          each stored installation, one JSON line
'use strict';
const fs = require('node:fs');
const { App } = require('@slack/bolt');

const installs = new Map();
const app = new App({
  signingSecret: process.env.SLACK_SIGNING_SECRET,
  clientId: process.env.SLACK_CLIENT_ID,
  clientSecret: process.env.SLACK_CLIENT_SECRET,
  stateSecret: 'e2e-bolt-state-secret',
  scopes: ['chat:write'],
  clientOptions: { slackApiUrl: process.env.SLACK_API_URL },
  installerOptions: { directInstall: true },
  installationStore: {
    storeInstallation: async (installation) => {
      const key = installation.isEnterpriseInstall ? installation.enterprise.id : installation.team.id;
      installs.set(key, installation);
      fs.appendFileSync(process.env.RECORD, JSON.stringify({
        key, botUserId: installation.bot?.userId, botId: installation.bot?.id, hasToken: !!installation.bot?.token,
      }) + '\n');
    },
    fetchInstallation: async (q) => {
      const i = installs.get(q.isEnterpriseInstall ? q.enterpriseId : q.teamId);
      if (!i) throw new Error('no installation');
      return i;
    },
    deleteInstallation: async (q) => { installs.delete(q.isEnterpriseInstall ? q.enterpriseId : q.teamId); },
  },
});

app.event('app_mention', async () => {});

(async () => {
  await app.start(Number(process.env.PORT));
  console.log('ready');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
