// Placeholder until the page's modules land: lists the worktrees.
const answer = await fetch("/v1/worktree_list", { method: "POST", body: "{}" });
document.getElementById("app").textContent = JSON.stringify(await answer.json(), null, 2);
