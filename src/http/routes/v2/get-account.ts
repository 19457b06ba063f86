import type { FastifyInstance } from 'fastify';
import type { AccountBody } from '../../openapi/schemas.js';
import { keyHolderOf } from '../../plugins/authentication.js';

/** Account dates have second precision (YYYY-MM-DDTHH:MM:SSZ). */
function toSecond(date: string | null): string | null {
  return date === null ? null : `${date.slice(0, 19)}Z`;
}

/** GET /account.json (v2.1+, beta): the account with its users and keys; API keys only. */
export default async function getAccount(app: FastifyInstance) {
  const { accounts } = app.services;

  app.get('/account.json', async (request) => {
    const { accountId } = keyHolderOf(request);
    const { account, users, keys } = await accounts.overview(accountId);
    return {
      name: account.name,
      balance: account.balance,
      starting_balance: account.startingBalance,
      billing_email: account.billingEmail,
      subscription: account.subscription,
      creation_date: toSecond(account.creationDate),
      modification_date: toSecond(account.modificationDate),
      users: Object.fromEntries(
        users.map((user) => [
          user.email,
          {
            creation_date: toSecond(user.creationDate),
            // The vendor's descriptor spells it last_login; its clients read last_login_date.
            last_login_date: toSecond(user.lastLoginDate),
            last_login: toSecond(user.lastLoginDate),
          },
        ]),
      ),
      keys: Object.fromEntries(
        keys.map((key) => [
          key.id,
          {
            active: key.active,
            detection_categories_enabled: key.detectionCategories,
            last_seen_date: toSecond(key.lastSeenDate),
            creation_date: toSecond(key.creationDate),
            tags: key.tags,
          },
        ]),
      ),
    } satisfies AccountBody;
  });
}
