"""Privileged scene geometry for the scripted expert: object point clouds, boxes, sites, joints.

Everything is read fresh from ``env.sim`` (the BDDL robosuite env), because LIBERO rebuilds the
simulator on every reset. Shapes come from the geoms' own vertices (meshes) or their analytic
extents (primitives), so no per-object size table is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

_CIRCLE = np.stack([np.cos(np.linspace(0, 2 * np.pi, 16, endpoint=False)),
                    np.sin(np.linspace(0, 2 * np.pi, 16, endpoint=False))], axis=1)


@dataclass(frozen=True)
class Box:
    """World axis-aligned bounding box."""

    lo: np.ndarray
    hi: np.ndarray

    @property
    def center(self) -> np.ndarray:
        return (self.lo + self.hi) / 2.0



def _box_surface(half: np.ndarray, spacing: float = 0.015) -> np.ndarray:
    """Grid points on a box's surface: corners alone miss the faces of big panels (walls)."""
    axes = [np.linspace(-h, h, max(2, int(np.ceil(2 * h / spacing)) + 1)) for h in half]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    return grid[np.any(np.isclose(np.abs(grid), half), axis=1)]


def _local_points(model: Any, gid: int) -> np.ndarray:
    """Points spanning one geom in its own frame (mesh vertices or primitive extents)."""
    gtype, size = model.geom_type[gid], model.geom_size[gid]
    if gtype == mujoco.mjtGeom.mjGEOM_MESH:
        mid = model.geom_dataid[gid]
        start, count = model.mesh_vertadr[mid], model.mesh_vertnum[mid]
        return np.asarray(model.mesh_vert[start:start + count], dtype=np.float64)
    if gtype == mujoco.mjtGeom.mjGEOM_BOX:
        return _box_surface(size[:3])
    if gtype in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_CAPSULE):
        half = size[1] + (size[0] if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.0)
        ring = np.c_[_CIRCLE * size[0], np.zeros(len(_CIRCLE))]
        return np.vstack([ring + [0, 0, -half], ring + [0, 0, half]])
    if gtype == mujoco.mjtGeom.mjGEOM_SPHERE:
        return np.vstack([np.c_[_CIRCLE * size[0], np.zeros(len(_CIRCLE))], [[0, 0, -size[0]], [0, 0, size[0]]]])
    if gtype == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        return np.array([[sx, 0, 0] for sx in (-1, 1)] + [[0, sy, 0] for sy in (-1, 1)]
                        + [[0, 0, sz] for sz in (-1, 1)]) * size
    return np.zeros((0, 3))  # planes and height fields have no useful extent


def _subtree_bodies(model: Any, root: int) -> list[int]:
    """The body and all its descendants."""
    bodies = [root]
    for b in range(root + 1, model.nbody):
        if model.body_parentid[b] in bodies:
            bodies.append(b)
    return bodies


def geom_points(sim: Any, gids: list[int]) -> np.ndarray:
    """World points spanning the given geoms."""
    model, data = sim.model._model, sim.data._data
    pts = [data.geom_xpos[g] + _local_points(model, g) @ data.geom_xmat[g].reshape(3, 3).T for g in gids]
    return np.vstack(pts) if pts else np.zeros((0, 3))


def body_geoms(sim: Any, body_id: int, collision_only: bool = True) -> list[int]:
    """Geoms of a body subtree; collision geoms only by default (what the fingers can touch)."""
    model = sim.model._model
    bodies = set(_subtree_bodies(model, body_id))
    return [g for g in range(model.ngeom) if model.geom_bodyid[g] in bodies
            and (not collision_only or model.geom_contype[g] or model.geom_conaffinity[g])]


def entity_points(env: Any, name: str) -> np.ndarray:
    """World points of a movable object or fixture (collision geoms, falling back to visuals)."""
    bid = env.obj_body_id[name]
    gids = body_geoms(env.sim, bid) or body_geoms(env.sim, bid, collision_only=False)
    return geom_points(env.sim, gids)


def entity_box(env: Any, name: str) -> Box:
    pts = entity_points(env, name)
    return Box(pts.min(axis=0), pts.max(axis=0))


def body_pos(env: Any, name: str) -> np.ndarray:
    return env.sim.data.body_xpos[env.obj_body_id[name]].copy()


@dataclass(frozen=True)
class Site:
    pos: np.ndarray
    rot: np.ndarray
    half: np.ndarray  # half-extents in the site frame


def site(env: Any, name: str) -> Site:
    data = env.sim.data
    return Site(data.get_site_xpos(name).copy(), data.get_site_xmat(name).reshape(3, 3).copy(),
                np.asarray(env.object_sites_dict[name].size, dtype=np.float64))


def narrow_yaw(points: np.ndarray, steps: int = 36) -> tuple[float, float]:
    """(yaw, width): the horizontal direction along which the points are narrowest, and the
    width there, searched over ``steps`` yaws in [0, 180) degrees. Closing the fingers along
    this direction gives the most opening margin."""
    xy = points[:, :2] - points[:, :2].mean(axis=0)
    best = (0.0, np.inf)
    for yaw in np.linspace(0.0, np.pi, steps, endpoint=False):
        proj = xy @ np.array([np.cos(yaw), np.sin(yaw)])
        width = float(proj.max() - proj.min())
        if width < best[1]:
            best = (float(yaw), width)
    return best


def joint_qpos(env: Any, joint: str) -> float:
    sim = env.sim
    return float(sim.data.qpos[sim.model.get_joint_qpos_addr(joint)])


def other_entities(env: Any, exclude: set[str]) -> list[str]:
    return [n for n in (*env.objects_dict, *env.fixtures_dict) if n not in exclude]
