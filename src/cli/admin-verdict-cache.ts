import type { Command } from 'commander';
import { newId } from '../accounts/credentials.js';
import { loadConfig } from '../config.js';
import { withStore } from './admin-support.js';

/** `assay admin verdict-cache clear`: no verdict stored so far is reused again. */
export function registerVerdictCacheCommands(admin: Command): void {
  admin
    .command('verdict-cache')
    .description('the verdicts content sent again may reuse (ASSAY_VERDICT_CACHE)')
    .command('clear')
    .description(
      'stop reusing every verdict stored so far, in every process on this store (after changing signatures clamd does not report in VERSION, e.g. your own databases in an external clamd)',
    )
    .action(async () => {
      await withStore(async (store) => {
        await store.engineVersions.set('verdict-cache', newId());
        console.log(
          `verdicts stored so far are no longer reused (every process sees it within ASSAY_ENGINE_VERSIONS_MAX_AGE_MS, ${loadConfig().engineVersionsMaxAgeMs} ms in this environment)`,
        );
      });
    });
}
