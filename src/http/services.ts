import type { AccountService, Principal } from '../accounts/account-service.js';
import type { Config } from '../config.js';
import type { ClamdClient } from '../engines/clamav/clamd-client.js';
import type { ContentProcessor } from '../processing/process-content.js';
import type { Store } from '../store/store.js';

/** What the transport layer may call; built once by the service and handed to the app. */
export interface Services {
  config: Config;
  store: Store;
  accounts: AccountService;
  processor: ContentProcessor;
  clamd: ClamdClient;
}

declare module 'fastify' {
  interface FastifyInstance {
    services: Services;
  }
  interface FastifyRequest {
    /** Set by the authentication hook on every authenticated route. */
    principal: Principal | null;
  }
}
