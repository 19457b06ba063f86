import { InvalidArgumentError } from 'commander';
import { AccountService } from '../accounts/account-service.js';
import { loadConfig } from '../config.js';
import { DETECTION_CATEGORIES, type DetectionCategory } from '../domain/records.js';
import { openStore } from '../store/open-store.js';
import type { Store } from '../store/store.js';

export function nonNegativeInteger(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('expected a whole number >= 0');
  return Number(value);
}

export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Opens the store of ASSAY_DATA_DIR for one command and always closes it. */
export async function withStore(action: (store: Store, accounts: AccountService) => Promise<void>) {
  const store = await openStore(loadConfig());
  try {
    await action(store, new AccountService(store));
  } finally {
    await store.close();
  }
}

export function print(json: boolean, value: unknown, text: string): void {
  console.log(json ? JSON.stringify(value, null, 2) : text);
}

/** `--category` values: the detection categories, upper case, each known. */
export function category(value: string, previous: DetectionCategory[]): DetectionCategory[] {
  const upper = value.trim().toUpperCase();
  const known = DETECTION_CATEGORIES.find((c) => c === upper);
  if (known === undefined) {
    throw new InvalidArgumentError(
      `unknown category ${value}; use ${DETECTION_CATEGORIES.join(', ')}`,
    );
  }
  return [...previous, known];
}
