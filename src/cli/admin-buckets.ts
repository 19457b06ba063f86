import { type Command, InvalidArgumentError, Option } from 'commander';
import {
  BucketSourceError,
  type BucketSourceInput,
  BucketSourceService,
  type BucketSourceUpdate,
} from '../buckets/bucket-source-service.js';
import type { BucketSource } from '../domain/records.js';
import { print, withStore } from './admin-support.js';
import { ProgressLine } from './progress.js';

/** Seconds, up to 10 years. */
function seconds(value: string): number {
  if (!/^\d{1,10}$/.test(value) || Number(value) > 10 * 365 * 86_400) {
    throw new InvalidArgumentError('expected a whole number of seconds');
  }
  return Number(value);
}

const onThreat = () =>
  new Option('--on-threat <action>', 'what a threat does besides its tag').choices([
    'tag',
    'quarantine',
    'delete',
  ]);

/** The options `add` and `update` share. */
function withSourceOptions(command: Command): Command {
  return command
    .option('--key <id>', 'the API key its objects are scanned as')
    .option('--endpoint <url>', "an S3-compatible server's URL (default: AWS)")
    .option('--region <region>', "the bucket's region (default: us-east-1)")
    .option('--prefix <prefix>', 'only keys that start with it')
    .option(
      '--credentials <which>',
      '`default` (the AWS SDK chain) or `env:NAME` (NAME_ACCESS_KEY_ID, NAME_SECRET_ACCESS_KEY)',
    )
    .option('--queue-url <url>', 'the SQS queue the bucket notifies')
    .addOption(onThreat())
    .option('--quarantine <bucket[/prefix]>', 'where --on-threat quarantine moves an object')
    .option('--callback <url>', "each object's result is sent here")
    .option(
      '--rescan-window <seconds>',
      'clean verdicts younger than this are scanned again when signatures change',
      seconds,
    )
    .option('--json', 'print JSON');
}

function describe(source: BucketSource, objects?: Record<string, number>): string {
  const where = `s3://${source.bucket}/${source.prefix}${source.endpoint === '' ? '' : ` at ${source.endpoint}`}`;
  const feeds = [
    source.queueUrl === null ? null : `SQS ${source.queueUrl}`,
    source.webhookTokenHash === null ? null : `webhook /bucket-events/${source.name}`,
  ].filter((feed) => feed !== null);
  const listing = source.listing;
  const lines = [
    `${source.name}  ${where}`,
    `  key ${source.apiKeyId}, credentials ${source.credentials}, on threat: ${source.onThreat}${source.quarantine === null ? '' : ` to ${source.quarantine}`}`,
    `  events: ${feeds.length === 0 ? 'none (listing only)' : feeds.join(', ')}`,
    `  listing: ${listing.state}, ${listing.count} objects${listing.finished === null ? '' : `, finished ${listing.finished}`}`,
  ];
  if (objects !== undefined) {
    const counts = Object.entries(objects).map(([status, count]) => `${status} ${count}`);
    lines.push(`  objects: ${counts.length === 0 ? 'none yet' : counts.join(', ')}`);
  }
  return lines.join('\n');
}

/** Public view of a source: never the webhook token's hash. */
function shown(source: BucketSource) {
  const { webhookTokenHash, ...rest } = source;
  return { ...rest, webhook: webhookTokenHash !== null };
}

function tokenNote(name: string, token: string | null): string {
  return token === null
    ? ''
    : `\nwebhook: POST /bucket-events/${name} with "Authorization: Bearer ${token}"\n(the token is shown only now: store it safely)`;
}

async function withSources(action: (sources: BucketSourceService) => Promise<void>) {
  try {
    await withStore((store) => action(new BucketSourceService(store)));
  } catch (error) {
    if (!(error instanceof BucketSourceError)) throw error;
    console.error(`error: ${error.message}`);
    process.exitCode = 2;
  }
}

/** `assay admin bucket …`: watched buckets (issue 42). */
export function registerBucketCommands(admin: Command): void {
  const bucket = admin
    .command('bucket')
    .description('watched buckets: objects scanned as they land');

  withSourceOptions(
    bucket
      .command('add <name>')
      .description('watch a bucket (and prefix); its objects are scanned as the key')
      .requiredOption('--bucket <bucket>', 'the bucket')
      .option(
        '--webhook',
        'accept MinIO-style events at /bucket-events/<name> (a token is printed once)',
      ),
  ).action(async (name: string, options) => {
    await withSources(async (sources) => {
      if (options.key === undefined) throw new BucketSourceError('--key <id> is required');
      const input: BucketSourceInput = {
        name,
        keyId: options.key,
        bucket: options.bucket,
        endpoint: options.endpoint,
        region: options.region,
        prefix: options.prefix,
        credentials: options.credentials,
        queueUrl: options.queueUrl,
        webhook: options.webhook === true,
        onThreat: options.onThreat,
        quarantine: options.quarantine,
        callback: options.callback,
        rescanWindow: options.rescanWindow,
      };
      const { source, webhookToken } = await sources.add(input);
      print(
        options.json,
        { ...shown(source), webhookToken },
        `${describe(source)}${tokenNote(source.name, webhookToken)}`,
      );
    });
  });

  withSourceOptions(
    bucket
      .command('update <name>')
      .description('change a watched bucket')
      .option('--webhook', 'a new webhook token (the old one stops working)')
      .option('--no-webhook', 'stop accepting webhook events'),
  ).action(async (name: string, options) => {
    await withSources(async (sources) => {
      const update: BucketSourceUpdate = {
        keyId: options.key,
        endpoint: options.endpoint,
        region: options.region,
        prefix: options.prefix,
        credentials: options.credentials,
        queueUrl: options.queueUrl,
        webhook: options.webhook,
        onThreat: options.onThreat,
        quarantine: options.quarantine,
        callback: options.callback,
        rescanWindow: options.rescanWindow,
      };
      const { source, webhookToken } = await sources.update(name, update);
      print(
        options.json,
        { ...shown(source), webhookToken },
        `${describe(source)}${tokenNote(source.name, webhookToken)}`,
      );
    });
  });

  bucket
    .command('list')
    .description('watched buckets, their listings and their objects by status')
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withSources(async (sources) => {
        const all = await sources.list();
        print(
          options.json,
          all.map(({ source, objects }) => ({ ...shown(source), objects })),
          all.length === 0
            ? 'no bucket is watched'
            : all.map(({ source, objects }) => describe(source, objects)).join('\n\n'),
        );
      });
    });

  bucket
    .command('scan <name>')
    .description(
      'list the whole bucket (prefix) and scan every object not scanned yet, in the processes that run jobs; resumes after a crash',
    )
    .option('--wait', 'show progress until the listing ends and its objects are scanned')
    .action(async (name: string, options) => {
      await withSources(async (sources) => {
        await sources.requestListing(name);
        console.log(`${name}: a full listing is requested`);
        if (options.wait === true) await followListing(sources, name);
      });
    });

  bucket
    .command('remove <name>')
    .description('stop watching a bucket (its objects and their tags stay, and so do its results)')
    .action(async (name: string) => {
      await withSources(async (sources) => {
        await sources.remove(name);
        console.log(`${name} is no longer watched`);
      });
    });
}

/** Progress of a source's listing and its scans, every second, until both are done. */
async function followListing(sources: BucketSourceService, name: string): Promise<void> {
  const progress = new ProgressLine();
  for (;;) {
    const { source, objects } = await sources.status(name);
    const scanning = objects.scanning ?? 0;
    const listed = source.listing.count;
    progress.update(
      `${name}: ${source.listing.state === 'idle' ? 'listed' : 'listing'}, scanned`,
      Math.max(0, listed - scanning),
      listed,
    );
    if (source.listing.state === 'idle' && scanning === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  progress.done();
  const { objects } = await sources.status(name);
  console.log(
    Object.entries(objects)
      .map(([status, count]) => `${status} ${count}`)
      .join(', '),
  );
}
