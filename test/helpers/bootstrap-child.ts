/**
 * One process creating the bootstrap key on the store of its environment: it opens the store,
 * says `ready`, waits for a line on stdin (so that several start their attempt together), then
 * prints the outcome.
 */
import { once } from 'node:events';
import { AccountService } from '../../src/accounts/account-service.js';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';

const store = await openStore(loadConfig());
try {
  const accounts = new AccountService(store);
  console.log('ready');
  await once(process.stdin, 'data');
  console.log(await accounts.ensureBootstrapKey('key', 'secret'));
} finally {
  await store.close();
  process.stdin.destroy();
}
