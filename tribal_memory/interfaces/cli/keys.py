"""API key commands: ``keys create``, ``keys list`` and ``keys revoke``.

They open only the SQL database (the data dir's SQLite file, or
``TRIBAL_DATABASE_URL``; no embedding model), so they are quick and work while
servers are running on the same database.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tribal_memory.auth.keys import ApiKey, open_api_keys
from tribal_memory.base.errors import NotFound
from tribal_memory.interfaces.cli.options import DataDirOption
from tribal_memory.interfaces.cli.output import Output
from tribal_memory.interfaces.cli.root import app as root_app
from tribal_memory.interfaces.cli.run import Run, with_run

app = typer.Typer(
    name="keys",
    help="API keys: each is bound to an owner (agent); admin keys act for every owner.",
    no_args_is_help=True,
)
root_app.add_typer(app)


def _key_dict(key: ApiKey) -> dict[str, object]:
    return {
        "key_id": key.key_id,
        "owner": key.owner,
        "admin": key.admin,
        "label": key.label,
        "created_at": key.created_at.isoformat(),
    }


@app.command()
def create(
    ctx: typer.Context,
    owner: Annotated[
        str, typer.Option("--owner", "-o", help="The agent or user the key acts for.")
    ],
    admin: Annotated[bool, typer.Option("--admin", help="May act for every owner.")] = False,
    label: Annotated[str, typer.Option(help="A note to tell keys apart.")] = "",
    data_dir: DataDirOption = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="One JSON object (with the key) instead of text.")
    ] = False,
) -> None:
    """Create a key and print it once: the key is the last line of the output.

    Only a hash is stored; a lost key cannot be shown again (revoke it and
    create another). Requests send it as ``Authorization: Bearer <key>``.
    """
    run = Run(ctx, data_dir, json_out)
    with open_api_keys(run.settings()) as keys:
        key, token = keys.create(owner, admin=admin, label=label)
    if json_out:
        run.emit({**_key_dict(key), "key": token})
        return
    role = "admin key" if key.admin else "key"
    typer.echo(f"created {role} {key.key_id} for owner {key.owner}; it is shown only once:")
    typer.echo(token)


@app.command("list")
@with_run
def list_keys(
    run: Run,
    owner: Annotated[
        str | None, typer.Option("--owner", "-o", help="Only this owner's keys.")
    ] = None,
) -> None:
    """List keys (ids, owners, roles; never the keys themselves)."""
    with open_api_keys(run.settings()) as keys:
        found = keys.list(owner)
    if not found and not run.json:
        run.err.print("no keys")
        return
    table = Table("key id", "owner", "admin", "label", "created")
    for key in found:
        table.add_row(
            key.key_id,
            key.owner,
            "yes" if key.admin else "",
            key.label,
            key.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    run.show(Output([_key_dict(key) for key in found], [table]))


@app.command()
@with_run
def revoke(
    run: Run,
    key_id: Annotated[str, typer.Argument(metavar="KEY_ID", help="From 'keys list'.")],
) -> Output:
    """Revoke a key: requests with it get 401 from now on."""
    with open_api_keys(run.settings()) as keys:
        if not keys.revoke(key_id):
            raise NotFound(f"no key with id {key_id}")
    return Output([{"key_id": key_id, "revoked": True}], [f"revoked {key_id}"])
