// Reads AG-UI events (one JSON object a line) on stdin and checks each against the protocol's own
// zod schemas (@ag-ui/core/schemas). Prints {"checked": n} or the first failure, and exits 1.
const { EventSchemas } = require("@ag-ui/core/schemas");
let input = "";
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const lines = input.split("\n").filter((line) => line.trim());
  for (const [index, line] of lines.entries()) {
    const checked = EventSchemas.safeParse(JSON.parse(line));
    if (!checked.success) {
      console.log(JSON.stringify({ index, event: JSON.parse(line), issues: checked.error.issues }));
      process.exit(1);
    }
  }
  console.log(JSON.stringify({ checked: lines.length }));
});
