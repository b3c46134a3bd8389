"""Cluster topologies: the cell tree, its readers (native YAML, HiveD, machine lists) and presets."""

from topologies.tree import Cell, CellSpec, NodeSpec, QueueSpec, Topology

__all__ = ["Cell", "CellSpec", "NodeSpec", "QueueSpec", "Topology"]
