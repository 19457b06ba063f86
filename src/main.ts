import { Command } from 'commander';
import { registerAdminCommands } from './cli/admin.js';
import { ConfigError, loadConfig } from './config.js';
import { createLogger, startService } from './service.js';

async function serve(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config);
  const service = await startService(config, logger);
  logger.info({ url: service.url, dataDir: config.dataDir }, 'assay is serving');
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

const program = new Command('assay').description('Assay content processing service');
program
  .command('serve')
  .description('start the HTTP service (settings: ASSAY_* variables)')
  .action(serve);
registerAdminCommands(program);

program.parseAsync().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  console.error(
    error instanceof ConfigError ? `configuration error: ${message}` : `assay: ${message}`,
  );
  process.exit(1);
});
