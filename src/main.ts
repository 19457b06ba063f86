import { Command } from 'commander';
import { registerAdminCommands } from './cli/admin.js';
import { registerScanCommand } from './cli/scan.js';
import { registerServeCommand } from './cli/serve.js';
import { ConfigError } from './config.js';

const program = new Command('assay').description('Assay content processing service');
registerServeCommand(program);
registerAdminCommands(program);
registerScanCommand(program);

program.parseAsync().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  console.error(
    error instanceof ConfigError ? `configuration error: ${message}` : `assay: ${message}`,
  );
  process.exit(1);
});
