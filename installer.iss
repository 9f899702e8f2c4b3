; Inno Setup script for the Windows installer of Agenvoy Desktop.
; Builds from the frozen app in dist\agenvoy-desktop (see packaging/).
[Setup]
AppName=Agenvoy Desktop
AppVersion=0.1.0
AppPublisher=Agenvoy
DefaultDirName={autopf}\Agenvoy Desktop
DefaultGroupName=Agenvoy Desktop
OutputBaseFilename=AgenvoyDesktopSetup
Compression=lzma2
SolidCompression=yes
PrivilegesRequired=lowest

[Files]
Source: "dist\agenvoy-desktop\*"; DestDir: "{app}"; Flags: recursesubdirs ignoreversion

[Icons]
Name: "{group}\Agenvoy Desktop"; Filename: "{app}\agenvoy-desktop.exe"

[Run]
Filename: "{app}\agenvoy-desktop.exe"; Args: "setup"; Flags: runhidden; StatusMsg: "Preparing local models..."
