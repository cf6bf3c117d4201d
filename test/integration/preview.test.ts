import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { it } from 'node:test';
import { integrationSuite } from './support/suite.js';
import { LABEL_PREVIEW } from '../../src/engine/sandbox-labels.js';
import { docker, ensureTestImages } from './support/docker.js';
import { copyOfShippedProfile, hintboxCommand, runHintbox, sandboxFolder } from './support/hintbox-process.js';

/** A copy: approving it writes the lock file beside the copy, not into the repository. */
const PROFILE = copyOfShippedProfile('filesystem');

/** Every file of a folder with its content and mode: equal before and after means untouched. */
function contentsOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(dir, { recursive: true }) as string[]) {
    const full = path.join(dir, name);
    const st = statSync(full);
    out[name] = `${st.mode.toString(8)} ${st.isFile() ? readFileSync(full, 'base64') : 'dir'}`;
  }
  return out;
}

async function previewContainers() {
  const { docker: d } = await docker();
  return d.listContainers({ all: true, filters: { label: [LABEL_PREVIEW] } });
}

/**
 * Previews through the whole stack: the real filesystem server, a client that declines every
 * confirmation (so the real call never runs), and the preview in what it was asked.
 */
integrationSuite('previews of calls in confirmations', { timeout: 300_000, images: [ensureTestImages] }, () => {
  it('shows the file changes of a dry run over a copy, and leaves the workspace untouched', async () => {
    const workspace = sandboxFolder();
    writeFileSync(path.join(workspace, 'notes.txt'), 'first line\nsecond line\n');
    writeFileSync(path.join(workspace, 'keep.bin'), Buffer.from([0, 1, 2, 3]));
    const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes'], { WORKSPACE: workspace });
    assert.equal(approve.code, 0, approve.stderr);
    const untouched = contentsOf(workspace);

    {
      await using hintbox = await runHintbox(PROFILE, { env: { WORKSPACE: workspace }, confirmations: 'deny' });
      const write = await hintbox.client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/new.txt', content: 'hello preview\n' },
      });
      assert.equal(write.isError, true, 'the declined call is refused');
      const edit = await hintbox.client.callTool({
        name: 'edit_file',
        arguments: {
          path: '/workspace/notes.txt',
          edits: [{ oldText: 'second line', newText: 'second line\nnew line' }],
        },
      });
      assert.equal(edit.isError, true, 'the declined call is refused');
      const read = await hintbox.client.callTool({
        name: 'read_text_file',
        arguments: { path: '/workspace/notes.txt' },
      });
      assert.equal(read.isError, true, 'declined too');

      assert.equal(hintbox.asked.length, 3, 'every call of the untrusted server was confirmed');
      const [writeAsked, editAsked, readAsked] = hintbox.asked.map((a) => a.message);
      assert.match(writeAsked ?? '', /Preview \(a dry run .* over a copy of \/workspace; nothing real was changed\)/);
      assert.match(
        writeAsked ?? '',
        /│ added: \/workspace\/new\.txt \(14 bytes\)\n│ --- \/dev\/null\n│ \+\+\+ b\/workspace\/new\.txt\n│ @@ -0,0 \+1,1 @@\n│ \+hello preview/,
      );
      assert.doesNotMatch(writeAsked ?? '', /notes\.txt|keep\.bin/, 'only what changed is shown');
      assert.match(
        editAsked ?? '',
        /│ changed: \/workspace\/notes\.txt\n│ --- a\/workspace\/notes\.txt\n│ \+\+\+ b\/workspace\/notes\.txt\n│ @@ -1,2 \+1,3 @@\n│ {2}first line\n│ {2}second line\n│ \+new line/,
      );
      assert.doesNotMatch(editAsked ?? '', /new\.txt/, 'the first dry run left nothing behind');
      assert.doesNotMatch(readAsked ?? '', /Preview \(|added:|changed:/, 'a read-only tool has no preview section');
      assert.match(readAsked ?? '', /No preview needed: the sandbox has no writable mount\./);
    }

    assert.deepEqual(contentsOf(workspace), untouched, 'the dry runs wrote only to copies');
    assert.deepEqual(await previewContainers(), [], 'no preview container remains');
  });

  it('says why there is no preview when the mount is too large', async () => {
    const workspace = sandboxFolder();
    // Over the 50 MB limit in sparse files: nothing is copied, the preview is refused up front.
    for (let i = 0; i < 3; i++) {
      const file = path.join(workspace, `big-${i}.bin`);
      writeFileSync(file, '');
      await import('node:fs/promises').then((fs) => fs.truncate(file, 20 * 1024 * 1024));
    }
    const approve = await hintboxCommand(['approve', PROFILE, '--all', '--yes'], { WORKSPACE: workspace });
    assert.equal(approve.code, 0, approve.stderr);
    {
      await using hintbox = await runHintbox(PROFILE, { env: { WORKSPACE: workspace }, confirmations: 'deny' });
      await hintbox.client.callTool({
        name: 'write_file',
        arguments: { path: '/workspace/new.txt', content: 'x' },
      });
      assert.match(
        hintbox.asked[0]?.message ?? '',
        /No preview: the mount \/workspace is larger than 50 MB \/ 5000 files\./,
      );
    }
    assert.deepEqual(readdirSync(workspace).sort(), ['big-0.bin', 'big-1.bin', 'big-2.bin']);
    assert.deepEqual(await previewContainers(), [], 'no preview container remains');
  });
});
