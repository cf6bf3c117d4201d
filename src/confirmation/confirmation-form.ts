import type { ElicitRequestFormParams, ElicitRequestURLParams } from '@modelcontextprotocol/sdk/types.js';
import { APPROVAL_WARNING_TEXT } from '../policy/approval-decision.js';
import { formatTags } from '../policy/tool-tags.js';
import type { CallPreview } from '../sandbox/preview.js';
import { renderServerLines, renderServerText } from '../util/render-server-text.js';
import type { CallToConfirm } from './call-to-confirm.js';

/**
 * What the person reads through the client: the form of a confirmation (form-mode elicitation)
 * and the question that gives them the console's link (URL mode). Pure.
 */

/**
 * How every confirmation hintbox asks for begins. A server's own elicitations are passed to the
 * client prefixed with the server's name; a profile may not take hintbox's (profile-schema.ts).
 */
export const CONFIRMATION_PREFIX = 'hintbox asks:';

/** A form the person accepted without ticking approve: a denial, and they are told so. */
export const ACCEPTED_UNTICKED =
  'the confirmation was declined: the form was submitted without "approve" ticked (submitting is not approving)';

/** Where the form is shown and what it says beside the call. */
export interface FormContext {
  server: string;
  /** Why the server is no longer trusted in this session, when it broke a hint. */
  untrustedBecause: string | undefined;
  /** The console's page of this confirmation, when there is a console. */
  link: string | undefined;
  preview: CallPreview;
}

/** The form asking whether the call may run: the call, why a person is asked, and the preview. */
export function confirmationForm(call: CallToConfirm, context: FormContext): ElicitRequestFormParams {
  const { decision } = call;
  const args = call.arguments ?? {};
  // Every argument is shown; only long values are cut (unless the call may be irreversible).
  const shown = JSON.stringify(decision.showFullArguments ? args : clipValues(args), null, 2);
  // Names and tags are checked at discovery; rendered anyway, as everything a server or a
  // client made: no character of theirs may start a line or act on the reader's screen.
  // The first words say whose question this is: a server's own elicitations reach the client
  // too, under the server's name, and must never pass for hintbox's.
  const lines = [
    `${CONFIRMATION_PREFIX} allow ${context.server} to run ${renderServerText(call.tool)}${call.tags.length ? ` [${renderServerText(formatTags(call.tags))}]` : ''} (sandbox ${call.sandbox})?`,
    ...decision.warnings.map((w) => `WARNING: ${APPROVAL_WARNING_TEXT[w]}`),
    ...(context.untrustedBecause
      ? [`WARNING: this server broke a hint earlier in this session: ${renderServerText(context.untrustedBecause)}`]
      : []),
    `Why you are asked: ${decision.reasons.join('; ')}.`,
    ...(context.link ? [`The call and its preview, on a page where you may answer too: ${context.link}`] : []),
    ...(call.standingCommand
      ? [`Asked too often? Only you can allow this tool always, in a terminal: ${call.standingCommand}`]
      : []),
    `Arguments${decision.showFullArguments ? ' (in full)' : ' (long values cut)'}:`,
    ...renderServerLines(shown),
    // Last, and fenced: the preview is the server's own output (file names, contents, errors),
    // so it must not be able to pass for hintbox's text above it.
    ...fence(previewText(context.preview)),
  ];
  return {
    message: lines.join('\n'),
    requestedSchema: {
      type: 'object',
      properties: {
        approve: {
          type: 'boolean',
          title: `Run ${renderServerText(call.tool)}?`,
          description: 'tick to run the call; unticked (or declined) denies it',
        },
      },
      required: ['approve'],
    },
  };
}

/** URL mode: the question that gives the person the console's page of this confirmation. */
export function linkQuestion(server: string, tool: string, page: { id: string; link: string }): ElicitRequestURLParams {
  return {
    mode: 'url',
    message: `${CONFIRMATION_PREFIX} allow ${server} to run ${renderServerText(tool)}? Review the call and answer on hintbox's console page.`,
    url: page.link,
    elicitationId: page.id,
  };
}

/** The preview section of a form's text: the dry run's changes, or one line saying why there are none. */
function previewText(preview: CallPreview): string[] {
  if (preview.available) return [preview.text];
  if (preview.reason === '') return [];
  return [`${preview.reason.charAt(0).toUpperCase()}${preview.reason.slice(1)}.`];
}

/** Top-level argument values longer than this are cut in confirmations that may cut. */
const MAX_SHOWN_VALUE = 500;

function clipValues(args: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(args).map(([key, value]) => {
      const text = typeof value === 'string' ? value : JSON.stringify(value);
      if (text === undefined || text.length <= MAX_SHOWN_VALUE) return [key, value];
      return [key, `${text.slice(0, MAX_SHOWN_VALUE)}… (${text.length} characters; cut)`];
    }),
  );
}

/**
 * Marks every line of server-made text, rendered (`renderServerText`): a line separator, a CR or
 * an escape sequence in it is shown, so nothing of it can start a line without the mark.
 */
function fence(lines: readonly string[]): string[] {
  return lines.flatMap(renderServerLines).map((l, i) => (i === 0 ? '' : '│ ') + l);
}
