import type { Command } from 'commander';
import { registerAccountCommands } from './admin-accounts.js';
import { registerBucketCommands } from './admin-buckets.js';
import { registerKeyCommands } from './admin-keys.js';
import { registerMigrateStoreCommand } from './admin-migrate-store.js';
import { registerUserCommands } from './admin-users.js';
import { registerVerdictCacheCommands } from './admin-verdict-cache.js';

/** `assay admin …`: accounts, users, keys and tokens, straight on the store of ASSAY_DATA_DIR. */
export function registerAdminCommands(program: Command): void {
  const admin = program
    .command('admin')
    .description('manage accounts, users, API keys and tokens in the store of ASSAY_DATA_DIR');
  registerAccountCommands(admin);
  registerUserCommands(admin);
  registerKeyCommands(admin);
  registerMigrateStoreCommand(admin);
  registerVerdictCacheCommands(admin);
  registerBucketCommands(admin);
}
