import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ApprovalEntry } from '../../src/console/console-approvals.js';
import type { AuditCallRecord, AuditEntry } from '../../src/audit/audit-reader.js';
import { approvalPage, approvalsPage } from '../../src/console/approval-pages.js';
import { auditPage, auditRecordPage } from '../../src/console/audit-pages.js';
import { definitionsPage, messagePage } from '../../src/console/console-pages.js';
import { html, lines } from '../../src/console/html.js';

/**
 * What a hostile server (or client) puts into every string it controls: markup, a quote that
 * would end an attribute and start an event handler, a line feed, an ANSI escape, a bidi
 * override, a line separator and invisible characters.
 */
const EVIL = `<script>alert(1)</script><img src=x onerror=alert(2)>" onmouseover="alert(3)' onfocus='alert(4)\`\nnext\u001b[31mred\u202eexe.txt\u2028sep\u200bzw\ufeffbom\u2066iso&amp;`;
const evil = (where: string): string => `${where}:${EVIL}`;

/** Characters that must never reach the page raw (each is shown as a visible escape). */
const RAW_FORBIDDEN: [string, string][] = [
  ['\u001b', '\\u001b'],
  ['\u202e', '\\u202e'],
  ['\u2028', '\\u2028'],
  ['\u200b', '\\u200b'],
  ['\ufeff', '\\ufeff'],
  ['\u2066', '\\u2066'],
];

/** The attributes the console's templates write; any other in a tag came from text. */
const OUR_ATTRIBUTES = new Set([
  'lang',
  'charset',
  'name',
  'content',
  'rel',
  'href',
  'class',
  'method',
  'action',
  'type',
  'value',
  'selected',
  'checked',
  'colspan',
]);

/** Every tag of a page with its attributes, read as a browser's tokenizer would (quoted values). */
function tagsOf(page: string): { tag: string; attributes: string[]; raw: string }[] {
  const out: { tag: string; attributes: string[]; raw: string }[] = [];
  for (const match of page.matchAll(
    /<([a-zA-Z][a-zA-Z0-9]*)((?:\s+[^\s=>/]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?)*)\s*\/?>/g,
  )) {
    const attributes = [...match[2]!.matchAll(/\s+([^\s=>/]+)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?/g)].map((a) =>
      a[1]!.toLowerCase(),
    );
    out.push({ tag: match[1]!.toLowerCase(), attributes, raw: match[0] });
  }
  return out;
}

function assertSafe(page: string, what: string): void {
  assert.doesNotMatch(page, /<script/i, `${what}: no script element`);
  assert.doesNotMatch(page, /<img/i, `${what}: no element made of text`);
  for (const [raw, shown] of RAW_FORBIDDEN) {
    assert.ok(!page.includes(raw), `${what}: ${JSON.stringify(raw)} reached the page raw`);
    assert.ok(page.includes(shown), `${what}: ${JSON.stringify(raw)} is shown as ${shown}`);
  }
  assert.ok(page.includes('&lt;script&gt;alert(1)&lt;/script&gt;'), `${what}: markup is shown as text`);
  assert.ok(page.includes('&quot; onmouseover=&quot;alert(3)&#39; onfocus=&#39;alert(4)&#96;'), `${what}: quotes`);
  assert.ok(page.includes('&amp;amp;'), `${what}: an entity in the text is shown as written`);
  for (const { tag, attributes, raw } of tagsOf(page)) {
    for (const name of attributes) {
      assert.ok(OUR_ATTRIBUTES.has(name), `${what}: attribute ${name} in <${tag}> came from text: ${raw}`);
    }
  }
  // Every attribute value is quoted, and none holds a quote, a < or a control character.
  for (const { raw } of tagsOf(page)) {
    for (const value of raw.matchAll(/=\s*("([^"]*)"|'[^']*'|[^\s>"']+)/g)) {
      assert.ok(value[1]!.startsWith('"'), `${what}: an unquoted attribute value: ${raw}`);
      assert.doesNotMatch(value[2]!, /[<>'`]/, `${what}: ${raw}`);
      assert.ok(![...value[2]!].some((c) => c.charCodeAt(0) < 0x20), `${what}: a control character in ${raw}`);
    }
  }
}

function entry(over: Partial<ApprovalEntry> = {}): ApprovalEntry {
  return {
    id: 'abcDEF123_-x',
    mode: 'held',
    askedAt: new Date('2026-01-02T03:04:05.000Z'),
    expiresAt: new Date('2026-01-02T03:14:05.000Z'),
    state: 'pending',
    request: {
      server: evil('server'),
      session: evil('session'),
      caller: { subject: evil('caller'), client: evil('client') },
      tool: evil('tool'),
      tags: [evil('tag')],
      sandbox: evil('sandbox'),
      sandboxGrant: evil('grant'),
      effectiveHints: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
      warnings: [evil('warning')],
      reasons: [evil('reason')],
      untrustedBecause: evil('untrusted'),
      arguments: { [evil('key')]: evil('value'), nested: { deep: [evil('item')] } },
      pinHash: 'pin',
      preview: {
        available: true,
        text: `added: /workspace/${EVIL}\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-${EVIL}\n+${EVIL}\n`,
      },
    },
    ...over,
  };
}

function call(over: Partial<AuditCallRecord> = {}): AuditCallRecord {
  return {
    kind: 'call',
    id: 'call-1',
    time: '2026-01-02T03:04:05.000Z',
    session: evil('session'),
    server: evil('server'),
    tool: evil('tool'),
    tags: [evil('tag')],
    claimedTags: [evil('claimed')],
    claimedHints: {},
    effectiveHints: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    sandbox: evil('sandbox'),
    decision: 'allowed',
    decidedBy: 'console',
    arguments: { [evil('key')]: evil('value') },
    pin: evil('pin'),
    traceId: null,
    caller: evil('caller'),
    client: evil('client'),
    subject: null,
    outcome: 'tool-error',
    detail: evil('detail'),
    hintViolation: evil('violation'),
    attempts: 1,
    endedAt: '2026-01-02T03:04:06.000Z',
    durationMs: 1000,
    ...over,
  };
}

describe('the console pages escape what servers and clients made', () => {
  it('a confirmation page: tool, server, arguments, preview, warnings, reasons, sandbox', () => {
    const page = approvalPage(entry(), 'csrf-token', true);
    assertSafe(page, 'approval page');
    for (const where of [
      'server',
      'tool',
      'caller',
      'client',
      'tag',
      'grant',
      'warning',
      'reason',
      'untrusted',
      'session',
    ]) {
      assert.ok(page.includes(`${where}:&lt;script&gt;`), `${where} is shown, escaped`);
    }
    // A line feed in a name is a visible escape, not a new line of the page.
    assert.ok(page.includes('tool:&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.match(page, /tool:[^\n]*\\u000anext/, "a tool name's line feed is shown as \\u000a");
    // Arguments are JSON: their line feeds are JSON escapes; their keys are escaped too.
    assert.ok(page.includes('key:&lt;script&gt;'), 'argument names are escaped');
    assert.ok(page.includes('value:&lt;script&gt;'), 'argument values are escaped');
    assert.ok(page.includes('item:&lt;script&gt;'), 'nested values are escaped');
    // The preview: each line in its span, escaped; its own line feeds are the diff's layout.
    const diff = /<pre class="diff">([\s\S]*?)<\/pre>/.exec(page)?.[1] ?? '';
    assert.match(diff, /<span class="add">\+&lt;script&gt;/);
    assert.match(diff, /<span class="del">-&lt;script&gt;/);
    assert.match(page, /<li>added: \/workspace\/&lt;script&gt;/, 'the changed file is listed, escaped');
    assert.ok(page.includes('<input type="hidden" name="csrf" value="csrf-token" />'));
  });

  it('a withdrawn confirmation with a server-made note, and the list of confirmations', () => {
    const withdrawn = entry({ state: 'withdrawn', note: evil('note'), answeredAt: new Date(0) });
    assertSafe(approvalPage(withdrawn, 'csrf', false), 'withdrawn page');
    const list = approvalsPage([entry(), withdrawn, entry({ id: 'other', mode: 'repeat', state: 'declined' })]);
    assertSafe(list, 'approvals list');
    assert.ok(list.includes('note:&lt;script&gt;'));
  });

  it('the audit trail: rows of calls and events, the filter values echoed in inputs, broken chains', () => {
    const event: AuditEntry = {
      kind: 'event',
      id: 'ev-1',
      time: '2026-01-02T03:04:07.000Z',
      type: 'approval.answered',
      subject: null,
      fields: {
        server: evil('ev-server'),
        tool: evil('ev-tool'),
        caller: evil('ev-caller'),
        client: evil('ev-client'),
        answer: evil('ev-answer'),
        by: 'console',
        violation: evil('ev-violation'),
      },
    };
    const page = auditPage(
      [call(), call({ id: 'call-2', outcome: null, decidedBy: 'person', detail: null }), event],
      { server: evil('q-server'), tool: evil('q-tool'), decision: evil('q-decision'), outcome: 'ok' },
      [
        {
          chain: 'c',
          files: 1,
          lines: 3,
          head: null,
          closed: false,
          breaks: [{ file: evil('file'), line: 2, message: evil('break') }],
          torn: [],
        },
      ],
    );
    assertSafe(page, 'audit page');
    // The filter's values are attribute values: the quote in them must not end the attribute.
    assert.ok(page.includes('<input name="server" value="q-server:&lt;script&gt;'), 'the server filter, escaped');
    assert.ok(page.includes('<input name="tool" value="q-tool:&lt;script&gt;'), 'the tool filter, escaped');
    for (const where of [
      'detail',
      'caller',
      'client',
      'ev-server',
      'ev-tool',
      'ev-caller',
      'ev-client',
      'ev-answer',
      'ev-violation',
      'break',
    ]) {
      assert.ok(page.includes(`${where}:&lt;script&gt;`), `${where} is shown, escaped`);
    }
    const failed = auditPage([], {}, { error: evil('error') });
    assertSafe(failed, 'audit page, unverifiable');
  });

  it("an audit record's page", () => {
    const page = auditRecordPage(call());
    assertSafe(page, 'audit record');
    for (const where of [
      'server',
      'tool',
      'detail',
      'violation',
      'sandbox',
      'tag',
      'claimed',
      'caller',
      'client',
      'pin',
      'key',
    ]) {
      assert.ok(page.includes(`${where}:&lt;script&gt;`), `${where} is shown, escaped`);
    }
  });

  it('definitions to approve: names, changes, the definition, the hash in a hidden input', () => {
    const page = definitionsPage(
      [
        {
          server: evil('server'),
          tool: evil('tool'),
          hash: evil('hash'),
          changes: [evil('change')],
          definition: JSON.stringify({ name: evil('name'), description: EVIL }, null, 2),
          lockFile: evil('lock'),
        },
      ],
      'csrf',
      evil('notice'),
    );
    assertSafe(page, 'definitions');
    assert.ok(page.includes('<input type="hidden" name="hash" value="hash:&lt;script&gt;'));
    for (const where of ['server', 'tool', 'change', 'lock', 'notice', 'name']) {
      assert.ok(page.includes(`${where}:&lt;script&gt;`), `${where} is shown, escaped`);
    }
  });

  it('a message page', () => {
    assertSafe(messagePage(evil('title'), evil('text'), true), 'message page');
  });
});

describe('html', () => {
  // proves: CONSOLE
  it('renders, then escapes, every value; html-made values pass as they are', () => {
    const made = html`<p title="${'a"b'}">${'<b>\u202e'}${html`<i>${'<'}</i>`}</p>`;
    assert.equal(made.text, '<p title="a&quot;b">&lt;b&gt;\\u202e<i>&lt;</i></p>');
    assert.equal(html`${null}${undefined}${false}${0}${['<', html`<br />`]}`.text, '0&lt;<br />');
  });

  it('keeps line feeds in multi-line text and renders everything else', () => {
    assert.equal(lines('a<\n\u2028b\r').text, 'a&lt;\n\\u2028b\\u000d');
  });
});
