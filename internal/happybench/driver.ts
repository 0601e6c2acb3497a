// The driver of the happy baseline: it reads a Claude Code transcript the
// way happy's session scanner does (ts/packages/happy-cli/src/claude/utils/
// sessionScanner.ts, readSessionEntries and the sync loop's processed-key
// check) and feeds each message to happy's unmodified session mapper with
// the state handling of happy's ApiSession.sendClaudeSessionMessage.
//
//   node driver.js FILE            prints a summary as one JSON line
//   node driver.js --json FILE     prints each envelope as a JSON line, then the summary
//
// Only this file is ours; everything under ts/ is happy's, unmodified.
import { readFileSync, writeSync } from 'node:fs';
import { RawJSONLinesSchema, type RawJSONLines } from './ts/packages/happy-cli/src/claude/types';
import { parseClaudeGoalStatusTranscriptEvent } from './ts/packages/happy-cli/src/claude/claudeGoalStatus';
import {
    mapClaudeLogMessageToSessionEnvelopes,
    type ClaudeSessionProtocolState,
} from './ts/packages/happy-cli/src/claude/utils/sessionProtocolMapper';

// sessionScanner.ts: INTERNAL_CLAUDE_EVENT_TYPES.
const INTERNAL_CLAUDE_EVENT_TYPES = new Set([
    'file-history-snapshot',
    'change',
    'queue-operation',
]);

// sessionScanner.ts: messageKey.
function messageKey(message: RawJSONLines): string {
    if (message.type === 'user') {
        return message.uuid;
    } else if (message.type === 'assistant') {
        return message.uuid;
    } else if (message.type === 'summary') {
        return 'summary: ' + message.leafUuid + ': ' + message.summary;
    } else if (message.type === 'system') {
        return message.uuid;
    } else {
        throw Error() // Impossible
    }
}

const args = process.argv.slice(2);
const json = args[0] === '--json';
const file = json ? args[1] : args[0];
if (!file) {
    process.stderr.write('usage: node driver.js [--json] FILE\n');
    process.exit(2);
}

const state: ClaudeSessionProtocolState = { currentTurnId: null };
const processedEntryKeys = new Set<string>();
const kinds: Record<string, number> = {};
let lines = 0;
let messages = 0;
let transcriptEvents = 0;
let skipped = 0;
let envelopes = 0;
let out: string[] = [];

function flush() {
    if (out.length > 0) {
        writeSync(1, out.join(''));
        out = [];
    }
}

// sessionScanner.ts: readSessionEntries (each line parsed and checked
// into a list of entries)...
type Entry = { kind: 'message'; key: string; message: RawJSONLines } | { kind: 'transcript-event' };
const entries: Entry[] = [];
const text = readFileSync(file, 'utf-8');
for (const l of text.split('\n')) {
    try {
        if (l.trim() === '') {
            continue;
        }
        lines++;
        const message = JSON.parse(l);
        if (message.type && INTERNAL_CLAUDE_EVENT_TYPES.has(message.type)) {
            continue;
        }
        const transcriptEvent = parseClaudeGoalStatusTranscriptEvent(message);
        if (transcriptEvent) {
            entries.push({ kind: 'transcript-event' });
            continue;
        }
        const parsed = RawJSONLinesSchema.safeParse(message);
        if (!parsed.success) {
            continue;
        }
        entries.push({ kind: 'message', key: messageKey(parsed.data), message: parsed.data });
    } catch (e) {
        // readSessionEntries logs the error and goes on.
        continue;
    }
}

// ...then the sync loop over them (an entry whose key was seen is
// skipped), each message mapped as ApiSession.sendClaudeSessionMessage
// does.
for (const entry of entries) {
    if (entry.kind !== 'message') {
        transcriptEvents++;
        continue;
    }
    if (processedEntryKeys.has(entry.key)) {
        skipped++;
        continue;
    }
    processedEntryKeys.add(entry.key);
    messages++;
    const mapped = mapClaudeLogMessageToSessionEnvelopes(entry.message, state);
    state.currentTurnId = mapped.currentTurnId;
    for (const e of mapped.envelopes) {
        envelopes++;
        kinds[e.ev.t] = (kinds[e.ev.t] ?? 0) + 1;
        if (json) {
            out.push(JSON.stringify(e) + '\n');
            if (out.length >= 1000) {
                flush();
            }
        }
    }
}
flush();
writeSync(1, JSON.stringify({ lines, messages, transcriptEvents, duplicates: skipped, envelopes, kinds }) + '\n');
