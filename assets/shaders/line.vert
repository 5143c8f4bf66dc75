#version 330
// Coloured lines and flat overlays: world lines (grid, traces, joint links) and HUD
// primitives in pixel space, both through one matrix.
uniform mat4 u_mvp;

in vec3 in_position;
in vec4 in_color;

out vec4 v_color;

void main() {
    v_color = in_color;
    gl_Position = u_mvp * vec4(in_position, 1.0);
}
