/**
 * The MCP methods hintbox reads or writes itself, by name, in one place (what the SDK's `Server`
 * and `Client` handle on their own — initialize, the lists, ping — are its business).
 */
export const METHOD = Object.freeze({
  toolsCall: 'tools/call',
  resourcesRead: 'resources/read',
  resourcesSubscribe: 'resources/subscribe',
  resourcesUnsubscribe: 'resources/unsubscribe',
  promptsGet: 'prompts/get',
  complete: 'completion/complete',
  setLevel: 'logging/setLevel',
  createMessage: 'sampling/createMessage',
  elicit: 'elicitation/create',
  listRoots: 'roots/list',
  /** The 2025 handshake: no method of MCP 2026-07-28 (refused on the stateless path). */
  initialize: 'initialize',
} as const);

/** The MCP notifications hintbox reads or writes itself. */
export const NOTIFICATION = Object.freeze({
  cancelled: 'notifications/cancelled',
  progress: 'notifications/progress',
  message: 'notifications/message',
  resourceUpdated: 'notifications/resources/updated',
  toolsChanged: 'notifications/tools/list_changed',
  promptsChanged: 'notifications/prompts/list_changed',
  resourcesChanged: 'notifications/resources/list_changed',
} as const);
