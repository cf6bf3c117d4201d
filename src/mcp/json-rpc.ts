import {
  ErrorCode,
  type CallToolResult,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { NOTIFICATION } from './methods.js';

/**
 * JSON-RPC messages as hintbox relays them: read as plain objects (no SDK validation on the hot
 * path), and what of them is passed on rebuilt from the members MCP defines. Pure.
 */

/** A JSON-RPC message as read off the wire, before anything is known of it. */
export type JsonRpcObject = Record<string, unknown> & {
  id?: RequestId;
  method?: string;
  params?: Record<string, unknown>;
};

export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Whether a value is an id MCP allows for a request: a string or a (safe) integer (JSON-RPC's `null`,
 * a fraction, an object are not). A "request" under another id is no request: not forwarded
 * (its answer could not be told from another's), left to the SDK, which drops it.
 */
export function isRequestId(value: unknown): value is RequestId {
  return typeof value === 'string' || Number.isSafeInteger(value);
}

/** A tool's failure as MCP says it: a result with `isError: true`, not a protocol error. */
export function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/**
 * A server's answer as the client gets it, under the client's id: its `result` (an object), or
 * its `error` (code, message, data); nothing else of what the server wrote — another member
 * could make the client read the message as something else. An answer with neither is an error.
 */
export function answerOf(message: JsonRpcObject, id: RequestId): JSONRPCMessage {
  const error = message.error;
  if (isObject(error)) {
    return {
      jsonrpc: '2.0',
      id,
      error: {
        // An integer, as JSON-RPC says, and a safe one (a client's schema refuses another, and its request hangs).
        code: Number.isSafeInteger(error.code) ? (error.code as number) : ErrorCode.InternalError,
        message: typeof error.message === 'string' ? error.message : 'error',
        ...(error.data !== undefined ? { data: error.data } : {}),
      },
    };
  }
  if (isObject(message.result)) return { jsonrpc: '2.0', id, result: message.result };
  const text = 'the server answered with neither a result nor an error';
  return { jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message: text } };
}

/**
 * A server's notification as the client gets it: its method and params, nothing else. A
 * "notification" that carries an id is a request (the client would answer it, and its answer
 * would meet hintbox's own request of that id: a confirmation): undefined, as is one whose
 * params are not an object. Dropped then.
 */
export function notificationOf(message: JsonRpcObject): JSONRPCMessage | undefined {
  if (message.id !== undefined || typeof message.method !== 'string') return undefined;
  if (message.params !== undefined && !isObject(message.params)) return undefined;
  return { jsonrpc: '2.0', method: message.method, ...(message.params ? { params: message.params } : {}) };
}

/** `notifications/cancelled` of a request (its late answer is dropped by whoever sent it). */
export function cancelNotification(requestId: RequestId, reason?: string): JSONRPCMessage {
  return { jsonrpc: '2.0', method: NOTIFICATION.cancelled, params: { requestId, ...(reason ? { reason } : {}) } };
}

/** An answer with an error (JSON-RPC `error`), under the client's id. */
export function errorAnswer(id: RequestId, code: number, message: string): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code, message } };
}
