/**
 * Outbound HTTP(S) for URLs that users hand us: every hop is checked against the AddressPolicy
 * before a packet leaves, and the socket is opened here, to the vetted IP, so a second DNS answer
 * (rebinding) can never change where a request goes.
 */
export type { OutboundOptions, ResolvedAddress } from './connection.js';
export { type FetchedContent, fetchContent, pingUrl, postBody } from './requests.js';
export { OutboundError, OutboundRefusedError } from './target.js';
